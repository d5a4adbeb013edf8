"""Trace files: the format from a name (for writing) or from the first bytes (for reading),
Parquet with validation, and Chrome/Perfetto JSON through ``recfn.formats.chrome``.

Parquet written by recfn, any Parquet with the event table's columns (``df.to_parquet`` of a
trace) and Chrome JSON (``.json``/``.json.gz``, torch.profiler's included) are read; anything
else is refused with a ``TraceFormatError`` that says what the file is not.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from typing import Any, Final, Union

import pyarrow as pa

from recfn.errors import RecfnValueError, TraceFormatError
from recfn.formats import schema
from recfn.formats.files import open_trace_file, path_name

PathLike = Union[str, "os.PathLike[str]"]
PARQUET: Final = "parquet"
CHROME: Final = "chrome"
SUFFIXES: Final = {".parquet": PARQUET, ".pq": PARQUET, ".json": CHROME, ".json.gz": CHROME}
"""File name endings that ``save`` accepts, and the format each one means."""


def trace_format(path: Any) -> str:
    """``"parquet"`` or ``"chrome"`` from the file name; ValueError naming the accepted ones."""
    name = path_name(path)
    lower = name.lower()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix):
            return SUFFIXES[suffix]
    raise RecfnValueError(
        f"cannot tell the trace format of {name!r}: use {', '.join(SUFFIXES)} "
        "(Parquet, or Chrome JSON)"
    )


def sniff(path: str) -> str:
    """``"parquet"`` or ``"chrome"`` from the file's first bytes; errors as `open_trace_file`,
    and TraceFormatError for a file that is neither."""
    with open_trace_file(path) as fh:
        head = fh.read(64)
    if not head:
        raise TraceFormatError(f"{path!r} is empty")
    if head.startswith(b"PAR1"):
        return PARQUET
    if head.startswith(b"\x1f\x8b"):
        return CHROME
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"["):
        return CHROME
    raise TraceFormatError(
        f"{path!r} is neither a recfn trace (Parquet) nor a Chrome/Perfetto JSON trace "
        "(not a Parquet file, not JSON)"
    )


def save(table: pa.Table, path: PathLike, *, overwrite: bool = False) -> None:
    """Write ``table`` in the format its name asks for (``trace_format``), whole or not at all;
    a file recfn did not write is replaced only with ``overwrite=True`` (``recfn.formats.files``)."""
    from recfn.formats.files import write_atomic

    name = path_name(path)
    table = schema.validate(table, "save")
    if trace_format(name) == CHROME:
        from recfn.formats.chrome import write_chrome_file

        shown_as = os.path.basename(name)
        write_atomic(
            name,
            lambda temporary: write_chrome_file(table, temporary, shown_as=shown_as),
            overwrite=overwrite,
        )
    else:
        write_atomic(name, lambda temporary: write_parquet(table, temporary), overwrite=overwrite)


def parquet_options(table: pa.Table) -> dict[str, Any]:
    """recfn's Parquet layout for ``table``: zstd, dictionary names, delta-coded ids and times,
    the Arrow schema stored so round trips are exact."""
    return {
        "compression": "zstd",
        "compression_level": 3,
        "use_dictionary": [c for c in schema.PARQUET_DICTIONARY if c in table.column_names],
        "column_encoding": {
            c: "DELTA_BINARY_PACKED" for c in schema.PARQUET_DELTA if c in table.column_names
        },
        "store_schema": True,
        "use_compliant_nested_type": False,  # keep Arrow's list item names: exact round trips
        **_page_rows(),
    }


@functools.cache
def _page_rows() -> dict[str, int]:
    """Pages cut by size alone (1 MiB), not every 20,000 rows, where pyarrow lets us choose: a
    page header, its checksum and a zstd context fewer per 20,000 rows (reading a trace's 8
    summary columns 10-15% faster)."""
    import inspect

    import pyarrow.parquet as pq

    from recfn.formats._digest import ROW_GROUP_ROWS

    if "max_rows_per_page" in inspect.signature(pq.ParquetWriter.__init__).parameters:
        return {"max_rows_per_page": ROW_GROUP_ROWS}
    return {}


def write_parquet(table: pa.Table, path: PathLike) -> None:
    """Write a validated ``table`` as Parquet (``parquet_options``) with a CRC32 in every page
    header and the table's content hash in the footer, so that ``read_parquet`` notices any byte
    that changes afterwards."""
    import pyarrow.parquet as pq

    from recfn.formats._digest import ROW_GROUP_ROWS

    pq.write_table(
        schema.with_required_columns(schema.with_content_hash(table)),
        os.fspath(path),
        row_group_size=ROW_GROUP_ROWS,  # the row groups the content hash was taken over
        write_page_checksum=True,
        **parquet_options(table),
    )


DECODE_ERRORS: Final = (pa.ArrowException, OSError, UnicodeDecodeError)
"""What pyarrow raised for 30,000 damaged copies of a trace (benchmarks/fuzz_files.py):
OSError (failed page checksums, thrift decoding), ArrowInvalid, ArrowNotImplementedError and
UnicodeDecodeError (metadata that is not UTF-8). MemoryError, ArrowMemoryError included, and
KeyboardInterrupt are not caught."""


def unreadable_parquet(path: str, exc: BaseException) -> TraceFormatError:
    """The error for a Parquet file pyarrow could not decode (one of ``DECODE_ERRORS``)."""
    return TraceFormatError(
        f"{path!r} is not a readable Parquet file (truncated or corrupted): "
        f"{type(exc).__name__}: {exc}"
    )


def metadata_copies_agree(footer: dict[bytes, bytes]) -> bool:
    """Whether a recfn file's footer metadata equals the copy inside its stored Arrow schema.

    A damaged key (``recfn.content_hash`` spelt otherwise) would otherwise make a file look as
    if it had no hash; with two copies that must agree, no single change goes unseen. Footers
    without ``recfn.`` keys in either copy are not compared.
    """
    import base64
    import binascii

    stored = footer.get(_ARROW_SCHEMA)
    if stored is None:
        return True
    try:
        copy = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(stored))).metadata or {}
    except binascii.Error:
        return False
    plain = {k: v for k, v in footer.items() if k != _ARROW_SCHEMA}
    if not any(k.startswith(_PREFIX) for k in (*plain, *copy)):
        return True
    return plain == copy


_ARROW_SCHEMA: Final = b"ARROW:schema"
_PREFIX: Final = schema.METADATA_PREFIX.encode()


def check_footer(path: str, footer: Any, arrow_schema: pa.Schema) -> None:
    """What ``read_parquet`` checks before reading a file's values, from its footer (a
    ``pyarrow.parquet.FileMetaData``) and Arrow schema: the footer's two copies of the metadata
    agree, a stored content hash is readable, and a recfn file's schema is one this recfn
    reads, with the exact types (``schema.check_schema``). ``TraceFormatError`` naming it."""
    source = f"load({path!r})"
    if not metadata_copies_agree(footer.metadata or {}):
        raise TraceFormatError(
            f"{source}: its metadata was altered (the footer's two copies of it differ)"
        )
    metadata = arrow_schema.metadata or {}
    schema.stored_content_hash(metadata, source)
    if schema.SCHEMA_VERSION_KEY.encode() in metadata:
        schema.check_schema(arrow_schema, source, exact=True)


class RowGroupCheck:
    """Verifies one Parquet file as a reader streams it row group by row group (``add`` each
    row group, in order; ``finish`` after the last), as ``read_parquet`` verifies a file read
    whole: its content hash (taken a row group at a time; a file hashed over whole columns,
    from before, is checked a column at a time when this is made) and no null where the schema
    has none. ``columns``: verify only these (default every column; each row group then needs
    only them): their digests and the layout's (names, types, metadata) are compared, the other
    columns are neither read nor checked. ``TraceFormatError`` naming the file. The footer and
    the schema are ``check_footer``'s; the events the reader's own."""

    def __init__(self, path: str, parquet: Any, columns: list[str] | None = None) -> None:
        from recfn.formats import _digest

        self.path = path
        self.source = f"load({path!r})"
        arrow_schema = parquet.schema_arrow
        names = arrow_schema.names
        self.columns = names if columns is None else [c for c in names if c in set(columns)]
        stored = schema.stored_content_hash(arrow_schema.metadata or {}, self.source)
        self.expected: dict[str, str] | None = None
        self.digest: _digest.RowGroupDigest | None = None
        if stored is not None:
            algorithm, expected, covered = stored
            self.expected = {k: expected.get(k, "") for k in [_digest.SCHEMA_PART, *self.columns]}
            if algorithm == _digest.ROW_GROUP_ALGORITHM:
                self.digest = _digest.RowGroupDigest(arrow_schema, covered, self.columns)
            else:
                self._check_whole_columns(parquet, covered)
        self.not_null = [name for name in self.columns if name in schema.NOT_NULL]
        self.rows = 0

    def _check_whole_columns(self, parquet: Any, covered: dict[bytes, bytes]) -> None:
        from recfn.formats import _digest

        assert self.expected is not None
        actual = {_digest.SCHEMA_PART: _digest.layout_digest(parquet.schema_arrow, covered)}
        for name in self.columns:
            column = decoded(self.path, parquet.read, columns=[name])
            actual[name] = _digest.table_digest(column, {})[name]
            del column
        schema.compare_digests(actual, self.expected, self.source)
        self.expected = None

    def digests(self, piece: pa.Table) -> list[bytes] | None:
        """What ``add`` needs of ``piece``'s content hash, computed apart (in another thread
        while the reader handles the row group before)."""
        return None if self.digest is None else self.digest.piece_digests(piece)

    def add(self, piece: pa.Table, digests: list[bytes] | None = None) -> None:
        """One row group, with at least the verified columns (``digests``: its ``digests``,
        when computed already)."""
        import pyarrow.compute as pc

        if self.digest is not None:
            if digests is None:
                digests = self.digest.piece_digests(piece)
            self.digest.add_digests(piece.num_rows, digests)
        for name in self.not_null:
            column = piece.column(name)
            if column.null_count:
                row = self.rows + int(pc.index(pc.is_null(column), True).as_py())
                raise TraceFormatError(f"{self.source}: row {row}: column {name!r} is null")
        self.rows += piece.num_rows

    def finish(self) -> None:
        if self.digest is not None and self.expected is not None:
            schema.compare_digests(self.digest.digests(), self.expected, self.source)


def verified_row_groups(path: str, footer: Any, columns: list[str]) -> Iterator[pa.Table]:
    """``columns`` of the Parquet file ``path`` (those it has) a row group at a time, each
    verified as the out-of-core summary verifies what it reads (`RowGroupCheck` of those
    columns: page checksums, their content hashes and the layout's, no null where the schema
    has none; the last check once the last row group is in). ``footer``: the file's footer,
    read already."""
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path, metadata=footer, page_checksum_verification=True)
    except DECODE_ERRORS as exc:
        raise unreadable_parquet(path, exc) from None
    check = RowGroupCheck(path, parquet, columns)
    for group in range(parquet.metadata.num_row_groups):
        piece = decoded(path, parquet.read_row_group, group, columns=check.columns)
        check.add(piece)
        yield piece
    check.finish()


def decoded(path: str, read: Any, *args: Any, **kwargs: Any) -> pa.Table:
    """``read(*args, **kwargs)`` of the Parquet file ``path``; ``TraceFormatError`` naming it
    for a value pyarrow cannot decode (a failed page checksum...)."""
    try:
        result: pa.Table = read(*args, **kwargs)
    except MemoryError:
        raise
    except DECODE_ERRORS as exc:
        raise unreadable_parquet(path, exc) from None
    return schema.with_nullable_columns(result)


def read_parquet(path: str) -> pa.Table:
    """recfn's own Parquet, else any Parquet that has the event table's columns (conformed).

    Page checksums are verified, the content hash of files that carry one is recomputed, and
    the events are checked (``schema.validate``): a damaged or altered file raises
    ``TraceFormatError`` naming it and what is wrong. recfn files without a content hash (from
    before it existed) are checked for their types and structure only.
    """
    import pyarrow.parquet as pq

    with open(path, "rb") as fh:  # permission errors stay OSError: the file is not to blame
        data = fh.read()
    try:
        parquet = pq.ParquetFile(pa.py_buffer(data), page_checksum_verification=True)
        table = schema.with_nullable_columns(parquet.read())
        copies_agree = metadata_copies_agree(parquet.metadata.metadata or {})
        row_groups = [
            parquet.metadata.row_group(i).num_rows for i in range(parquet.metadata.num_row_groups)
        ]
    except MemoryError:
        raise
    except DECODE_ERRORS as exc:
        raise unreadable_parquet(path, exc) from None
    source = f"load({path!r})"
    if not copies_agree:
        raise TraceFormatError(
            f"{source}: its metadata was altered (the footer's two copies of it differ)"
        )
    metadata = table.schema.metadata or {}
    if schema.CONTENT_HASH_KEY.encode() in metadata:
        table = schema.check_content_hash(table, source, row_groups)
    if schema.SCHEMA_VERSION_KEY.encode() in metadata:
        return schema.validate(table, source, exact=True)
    missing = [c for c in schema.ESSENTIAL if c not in table.column_names]
    if missing:
        raise schema.not_a_trace(repr(path), missing)
    conformed = schema.conform(table.replace_schema_metadata(None), source)
    schema.check_events(conformed, source)
    return conformed


def read_chrome(path: str) -> pa.Table:
    """A Chrome JSON trace as a schema table, as `read_parquet` returns one; TraceFormatError
    for broken files."""
    from recfn.formats.chrome import read_chrome_table

    return schema.conform(read_chrome_table(path), path)
