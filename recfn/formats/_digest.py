"""Content hashes of event tables: what recfn stores in a Parquet footer and checks on load.

A digest covers each column's logical values, not its Arrow buffers: a table read back from
Parquet may be chunked differently, sliced, padded, or carry its dictionaries in another order
or with unused entries, and it must still hash the same. Per column the digest feeds the name,
the type, the validity bitmap (packed, nulls dropped from the values after it), then the values:
fixed-width values as contiguous little-endian numbers, strings as lengths plus bytes, lists as
lengths plus their flattened items, dictionaries as their used values sorted plus each row's rank
among them. One digest per column lets a mismatch name the column that changed.

Files are hashed a row group at a time (``ROW_GROUP_ALGORITHM``): each row group's column is
digested as above, and the column's digest is the digest of its row groups' (their row counts and
digests, in order). A reader that streams a file row group by row group (the out-of-core summary)
then checks it without holding a whole column; ``ALGORITHM`` (one digest over the whole column)
is what files written before it carry, and is still checked.
"""

from __future__ import annotations

import json
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

ALGORITHM: Final = "xxh3_128"
"""XXH3, 128 bits: tens of GB/s, where hashlib's sha256 and blake2b do about 1 (this catches
damage, not forgery: anyone who can edit a file can recompute any unkeyed hash)."""
ROW_GROUP_ALGORITHM: Final = "xxh3_128/row_groups"
"""XXH3-128 per row group and column, combined per column (``RowGroupDigest``)."""
ROW_GROUP_ROWS: Final = 1 << 19
"""Rows of each row group recfn writes (the last may hold fewer), as the digests were taken.
A reader that streams a file (the out-of-core summary, DuckDB, Dask) holds a row group's columns
while it decodes and hashes them: at 512k rows a summary of 10M ranges peaks at about 340 MiB
instead of 440 with 1M, for files 0.3% larger; at 256k, 300 MiB, but the per-row-group work
made a dataset of 64 processes 9% slower to summarise (docs/benchmarks.md). Files written with
other row groups are checked over their own."""
SCHEMA_PART: Final = ""
"""The digest of the column names, types and the other ``recfn.`` metadata has this key."""


def table_digest(table: pa.Table, metadata: dict[bytes, bytes]) -> dict[str, str]:
    """Hex digests of ``table``: one per column, and one (``SCHEMA_PART``) of the column names
    and types in order together with ``metadata``."""
    digests = {SCHEMA_PART: layout_digest(table.schema, metadata)}
    for field, column in zip(table.schema, table.columns):
        digests[field.name] = _column_digest(field, column).hex()
    return digests


def layout_digest(schema: pa.Schema, metadata: dict[bytes, bytes]) -> str:
    """The digest of the column names and types in order, with ``metadata``."""
    layout = xxhash.xxh3_128()
    layout.update(json.dumps([[f.name, str(f.type)] for f in schema]).encode())
    layout.update(repr(sorted(metadata.items())).encode())
    return str(layout.hexdigest())


class RowGroupDigest:
    """``ROW_GROUP_ALGORITHM``'s digests of a table met a row group at a time (``add``, in
    order); ``digests()`` then gives them as ``table_digest`` does. ``columns``: digest only
    these (every column by default): a column's digest depends on that column alone, so a
    reader that needs a few columns reads and checks just those (the layout's digest, of the
    schema and metadata, is always taken)."""

    def __init__(
        self,
        schema: pa.Schema,
        metadata: dict[bytes, bytes],
        columns: list[str] | None = None,
    ) -> None:
        self.names = schema.names if columns is None else list(columns)
        self.layout = layout_digest(schema, metadata)
        self.columns = [xxhash.xxh3_128() for _ in self.names]

    def add(self, piece: pa.Table) -> None:
        """One row group (a table with at least the digested columns); empty ones do not
        count."""
        self.add_digests(piece.num_rows, self.piece_digests(piece))

    def piece_digests(self, piece: pa.Table) -> list[bytes]:
        """The digests of one row group's columns, to be added in order (``add_digests``):
        the part of ``add`` that several row groups can take at once, in threads."""
        return [_column_digest(piece.schema.field(name), piece.column(name)) for name in self.names]

    def add_digests(self, rows: int, digests: list[bytes]) -> None:
        """A row group of ``rows`` rows, by its ``piece_digests``."""
        if not rows:
            return
        counted = rows.to_bytes(8, "little")
        for combined, digest in zip(self.columns, digests):
            combined.update(counted)
            combined.update(digest)

    def digests(self) -> dict[str, str]:
        found = {SCHEMA_PART: self.layout}
        for name, combined in zip(self.names, self.columns):
            found[name] = combined.hexdigest()
        return found


def row_group_digest(
    table: pa.Table, metadata: dict[bytes, bytes], row_groups: list[int]
) -> dict[str, str]:
    """``ROW_GROUP_ALGORITHM``'s digests of ``table`` cut into row groups of these sizes."""
    digest = RowGroupDigest(table.schema, metadata)
    at = 0
    for rows in row_groups:
        digest.add(table.slice(at, rows))
        at += rows
    return digest.digests()


def row_groups_of(rows: int) -> list[int]:
    """The row group sizes recfn writes a table of ``rows`` rows with."""
    return [min(ROW_GROUP_ROWS, rows - at) for at in range(0, rows, ROW_GROUP_ROWS)]


def _column_digest(field: pa.Field, column: pa.ChunkedArray) -> bytes:
    """The 16 bytes of one column's digest (as ``table_digest`` takes it)."""
    h = xxhash.xxh3_128()
    h.update(str(field.type).encode())
    if column.num_chunks > 1 and pa.types.is_string(column.type):
        _feed_chunked_strings(h, column)
    else:
        _feed(h, _contiguous(column))
    return bytes(h.digest())


def _contiguous(column: pa.ChunkedArray) -> pa.Array:
    if column.num_chunks == 1:
        return column.chunk(0)
    if column.num_chunks == 0:
        return pa.array([], column.type)
    return column.combine_chunks()


def _feed(h: Any, array: pa.Array) -> None:
    """Feed ``array``'s logical values into ``h``."""
    dtype = array.type
    h.update(len(array).to_bytes(8, "little"))
    if array.null_count:
        h.update(b"N")
        validity = _validity(array)
        h.update(validity)
        if pa.types.is_integer(dtype) or pa.types.is_floating(dtype):
            h.update(_valid_numbers(array, validity).data)
            return
        array = array.drop_null()
    else:
        h.update(b"V")
    if pa.types.is_dictionary(dtype):
        _feed_dictionary(h, array)
    elif pa.types.is_boolean(dtype):
        h.update(np.packbits(array.to_numpy(zero_copy_only=False)).tobytes())
    elif pa.types.is_integer(dtype) or pa.types.is_floating(dtype):
        values = array.to_numpy(zero_copy_only=False)
        h.update(values.astype(values.dtype.newbyteorder("<"), copy=False).data)
    elif pa.types.is_string(dtype) or pa.types.is_binary(dtype):
        _feed_strings(h, [array])
    elif pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        lengths = pc.list_value_length(array).to_numpy(zero_copy_only=False)
        h.update(lengths.astype("<i8", copy=False).data)
        _feed(h, pc.list_flatten(array))
    elif not pa.types.is_null(dtype):
        h.update(json.dumps(array.to_pylist(), default=repr).encode())


def _valid_numbers(array: pa.Array, validity: bytes) -> np.ndarray:
    """The non-null values of a fixed-width number array, little-endian: what
    ``array.drop_null()`` holds, picked by a numpy mask from the validity bitmap (half the time
    of Arrow's filter and its copy back)."""
    dtype = np.dtype(array.type.to_pandas_dtype())
    if array.buffers()[1] is None:  # every value null
        return np.zeros(0, dtype=dtype.newbyteorder("<"))
    values = np.frombuffer(
        array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize
    )
    bits = np.frombuffer(validity, dtype=np.uint8)
    valid = np.unpackbits(bits, count=len(array), bitorder="little").view(np.bool_)
    found: np.ndarray = values[valid].astype(dtype.newbyteorder("<"), copy=False)
    return found


def _validity(array: pa.Array) -> bytes:
    """The validity bitmap, LSB first, bits past the end cleared."""
    bitmap = array.buffers()[0]
    n = len(array)
    if bitmap is None or array.offset % 8:
        valid = pc.is_valid(array).to_numpy(zero_copy_only=False)
        return np.packbits(valid, bitorder="little").tobytes()
    start = array.offset // 8
    bits = bytearray(memoryview(bitmap)[start : start + (n + 7) // 8])
    if n % 8:
        bits[-1] &= (1 << (n % 8)) - 1
    return bytes(bits)


def _feed_strings(h: Any, arrays: list[pa.Array]) -> None:
    """Lengths then bytes of string arrays without nulls, as one array's would be, whatever
    their offsets and padding."""
    spans = []
    for array in arrays:
        if len(array):
            _, offsets_buffer, data = array.buffers()
            offsets = np.frombuffer(offsets_buffer, np.int32, len(array) + 1, array.offset * 4)
            h.update(np.diff(offsets).astype("<i8", copy=False).data)
            if data is not None:
                spans.append(memoryview(data)[int(offsets[0]) : int(offsets[-1])])
    for span in spans:
        h.update(span)


def _feed_chunked_strings(h: Any, column: pa.ChunkedArray) -> None:
    """What `_feed` feeds for the strings of ``column.combine_chunks()``, a chunk at a time:
    a long column (a Chrome import's args) is not copied whole to be hashed."""
    h.update(len(column).to_bytes(8, "little"))
    if column.null_count:
        h.update(b"N")
        valid = [pc.is_valid(chunk).to_numpy(zero_copy_only=False) for chunk in column.chunks]
        h.update(np.packbits(np.concatenate(valid), bitorder="little").tobytes())
        del valid
    else:
        h.update(b"V")
    _feed_strings(h, [chunk.drop_null() if chunk.null_count else chunk for chunk in column.chunks])


_FEW_VALUES: Final = 8
"""Up to this many dictionary values, which are used is found by one compare per value (a
pass over the indices as they are, no cast)."""


def _feed_dictionary(h: Any, array: pa.DictionaryArray) -> None:
    """The used values sorted, then each row's rank among them: the same for every dictionary
    order, duplicate or unused entries, and chunking of the same logical values."""
    dictionary = array.dictionary
    if dictionary.null_count:
        _feed(h, array.cast(dictionary.type))
        return
    indices = array.indices.to_numpy(zero_copy_only=False)
    values = dictionary.to_pylist()
    if len(values) <= _FEW_VALUES:  # kind, scope: a compare per value beats a count
        used = np.array([bool((indices == code).any()) for code in range(len(values))], bool)
    else:
        used = np.bincount(indices, minlength=len(values)) > 0
    ordered = sorted({value for value, hit in zip(values, used) if hit})
    rank_of = {value: rank for rank, value in enumerate(ordered)}
    ranks = np.array([rank_of.get(value, -1) for value in values], dtype=np.int32)
    _feed(h, pa.array(ordered, dictionary.type))
    if bool((ranks == np.arange(len(ranks))).all()):  # sorted, unique, all used: no gather
        h.update(indices.astype("<i4", copy=False).data)
    else:
        h.update(ranks.take(indices).astype("<i4", copy=False).data)
