"""JSON encoding and decoding for trace files: orjson when installed, else the json module.

orjson is an optional accelerator (about twice as fast to parse, several times faster to
encode); results are the same with either backend.
"""

from __future__ import annotations

import json
from typing import Any, cast

import numpy as np
import pyarrow as pa

# The orjson module, or None for the json module; tests and benchmarks set it to compare.
orjson: Any
try:
    import orjson
except ImportError:  # pragma: no cover - depends on the environment
    orjson = None


def loads(raw: bytes) -> Any:
    """Parse JSON; raises ValueError (or UnicodeDecodeError) for malformed input."""
    return orjson.loads(raw) if orjson else json.loads(raw)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON."""
    if orjson:
        return cast(bytes, orjson.dumps(value))
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def json_strings(values: list[Any]) -> tuple[pa.LargeStringArray, bytes]:
    """Each value as a JSON string (null for None and empty containers), built in one buffer,
    and that buffer.

    orjson serialises value by value (about 0.3 us each). The json module is slower per call,
    so it serialises the whole list once and the elements are cut out at its top-level commas,
    found with numpy.
    """
    encode = orjson.dumps if orjson else dumps
    text = b"" if orjson else encode(values)
    if orjson or b"\\" in text:  # escaped quotes would break the quote parity of the split
        blobs = [b"" if v is None else encode(v) for v in values]
        lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs))
        text = b"".join(blobs)
        data = np.frombuffer(text, dtype=np.uint8)
    else:
        data, lengths = _split_list(text, len(values))
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    first = data[np.minimum(offsets[:-1], max(len(data) - 1, 0))] if len(data) else np.zeros(len(values))
    empty = ((lengths == 2) & (first == ord("{"))) | ((lengths == 2) & (first == ord("[")))
    null = (lengths == 4) & (first == ord("n"))
    present = (lengths > 0) & ~empty & ~null
    strings = pa.LargeStringArray.from_buffers(
        len(values),
        pa.py_buffer(offsets),
        pa.py_buffer(data),
        pa.py_buffer(np.packbits(present, bitorder="little")),
    )
    return strings, text


_STRUCTURAL = np.zeros(256, dtype=bool)
_STRUCTURAL[[ord(c) for c in "{}[],"]] = True
_NESTING = np.zeros(256, dtype=np.int64)
_NESTING[[ord("{"), ord("[")]] = 1
_NESTING[[ord("}"), ord("]")]] = -1


def _split_list(text: bytes, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of the `n` elements of the compact JSON list `text` (which has no
    backslashes, so every quote delimits a string), concatenated, and their lengths."""
    if n == 0:
        return np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64)
    chars = np.frombuffer(text, dtype=np.uint8)
    structural = np.flatnonzero(_STRUCTURAL[chars])
    quotes = np.flatnonzero(chars == ord('"'))
    structural = structural[np.searchsorted(quotes, structural) % 2 == 0]  # outside strings
    symbol = chars[structural]
    depth = np.cumsum(_NESTING[symbol])
    cuts = structural[((symbol == ord(",")) & (depth == 1)) | (depth == 0) | (structural == 0)]
    keep = np.ones(len(chars), dtype=bool)
    keep[cuts] = False
    return chars[keep], np.diff(cuts) - 1
