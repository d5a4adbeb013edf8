"""JSON encoding and decoding for trace files, with msgspec."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

loads = msgspec.json.decode
"""Parse JSON; raises ValueError (msgspec.DecodeError) for malformed input."""


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON."""
    return msgspec.json.encode(value)


def compact(text: bytes) -> bytes:
    """JSON text without whitespace between tokens (``msgspec.Raw`` values keep the file's)."""
    return msgspec.json.format(text, indent=-1)


def json_strings(values: list[Any], rows: np.ndarray) -> tuple[pa.LargeStringArray, bytes]:
    """``values[rows]`` as compact JSON strings (null for None and empty containers), and all
    `values` as one compact JSON list, which tells cheaply whether a key occurs anywhere and
    decodes back to `values`. Values can be ``msgspec.Raw`` (JSON text, copied as it is).

    Values are usually all objects or None (event args). Then one `dumps` of the whole list
    encodes them, several times faster than one call per value, and the list is cut at its
    separators: ``},{``, ``},n``, ``l,{`` or ``l,n`` (``null``). When every value is an object
    or null and there are exactly as many separators as values less one, none lies inside a
    value. Otherwise each value is encoded alone.
    """
    n = len(values)
    kinds = set(map(type, values))
    if n > 1 and kinds <= {dict, msgspec.Raw, type(None)}:
        encoded = dumps(values)
        text = compact(encoded)
        cuts = _separators(text)
        if len(cuts) == n - 1 and (
            msgspec.Raw not in kinds or _objects_or_nulls(values, encoded, kinds == {msgspec.Raw})
        ):
            # Values and the commas between them alternate: value k is entry 2k, a null comma
            # entry 2k+1, so that the offsets stay contiguous and `take` skips the commas.
            bounds = np.empty(2 * n, dtype=np.int64)
            bounds[0], bounds[-1] = 1, len(text) - 1
            bounds[1:-1:2], bounds[2:-1:2] = cuts, cuts + 1
            present = np.zeros(2 * n - 1, dtype=bool)
            present[0::2] = _present(text, bounds[0::2], np.diff(bounds)[0::2])
            data = pa.py_buffer(text)
            return string_array(2 * n - 1, bounds, data, present).take(pa.array(2 * rows)), text
    blobs = [compact(dumps(v)) for v in values]
    lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=n)
    text = b"[" + b",".join(blobs) + b"]"
    # Value k starts after the bracket and k values and commas: entry 2k; the commas, entries
    # 2k+1, are null.
    steps = np.ones(2 * n, dtype=np.int64)
    steps[0::2] = lengths
    bounds = np.ones(2 * n, dtype=np.int64)
    np.cumsum(steps[:-1], out=bounds[1:])
    bounds[1:] += 1
    present = np.zeros(max(2 * n - 1, 0), dtype=bool)
    present[0::2] = _present(text, bounds[0::2], lengths)
    bounds = bounds if n else np.zeros(1, dtype=np.int64)
    strings = string_array(max(2 * n - 1, 0), bounds, pa.py_buffer(text), present)
    return strings.take(pa.array(2 * rows)), text


def _objects_or_nulls(values: list[Any], encoded: bytes, only_texts: bool) -> bool:
    """Whether every JSON text (``msgspec.Raw``) among `values` is an object or null (a list,
    say, leaves no separator before or after it, and a separator inside it would take its
    place); `encoded` is their JSON list, in which texts are copied as they are; `only_texts`
    when every value is a JSON text."""
    if not only_texts:
        return all(
            value.__class__ is not msgspec.Raw or bytes(memoryview(value)[:1]) in (b"{", b"n")
            for value in values
        )
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    starts = np.cumsum(lengths + 1) - lengths  # after the bracket and each value and comma
    first = np.frombuffer(encoded, dtype=np.uint8)[np.minimum(starts, len(encoded) - 1)]
    return bool(((lengths > 0) & ((first == ord("{")) | (first == ord("n")))).all())


def _separators(text: bytes) -> np.ndarray:
    """Positions of the commas of the JSON list `text` that sit between two objects or nulls."""
    chars = np.frombuffer(text, dtype=np.uint8)
    commas = np.flatnonzero(chars == ord(","))
    before, after = chars[commas - 1], chars[commas + 1]
    ends = (before == ord("}")) | (before == ord("l"))
    starts = (after == ord("{")) | (after == ord("n"))
    return np.asarray(commas[ends & starts])


def _present(text: bytes, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Which of the JSON values at `starts` are neither empty, ``null``, ``{}`` nor ``[]``."""
    if len(text) == 0:
        return np.zeros(len(starts), dtype=bool)
    first = np.frombuffer(text, dtype=np.uint8)[np.minimum(starts, len(text) - 1)]
    empty = (lengths == 2) & ((first == ord("{")) | (first == ord("[")))
    null = (lengths == 4) & (first == ord("n"))
    return np.asarray((lengths > 0) & ~empty & ~null)


def string_array(
    n: int, offsets: np.ndarray, data: pa.Buffer, present: np.ndarray
) -> pa.LargeStringArray:
    """A string array over `data` without copying it; `present` is the validity."""
    validity = pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), data, validity)
