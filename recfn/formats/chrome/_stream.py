"""Reading a Chrome trace's JSON a chunk at a time; see `recfn.formats.chrome.read_chrome_trace`.

A trace is one JSON document, but its events can be decoded a batch at a time: `stream_events`
cuts the inflated text of the ``traceEvents`` list after an event's closing brace and decodes
``[`` + the events before the cut + ``]``. That text parses only if the cut lies between two
events (a cut inside a string leaves the string open, a cut inside an event leaves a bracket
open), so every decoded batch is exact; a cut that does not parse is moved back. Files that do
not have the usual shape (no list of events found near the start, a list missing its closing
bracket, members that do not parse) make `stream_events` give up, and the caller decodes the
file whole, which tells what is wrong with it.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, Final

import msgspec
import numpy as np

from recfn.errors import TraceFormatError
from recfn.formats.chrome import _json as jsonio
from recfn.formats.chrome._reader import NativeBatch, decode_events

MAX_JSON_BYTES: Final = 4 << 30
"""The most JSON bytes `read_chrome_trace` reads by default (after decompression): a small
``.json.gz`` can inflate a thousandfold, so decompression stops past this."""
MAX_DEPTH: Final = 128
"""The deepest JSON nesting a trace may have, its own levels included (an event's args start at
level 4), so that decoding and re-encoding never come near Python's recursion limit."""
CHUNK: Final = 2 << 20
"""JSON bytes read at a time; a batch of events is about this much text."""
_HEAD: Final = 64 << 20
"""How far into a trace object its ``traceEvents`` list must start to be streamed."""
MAX_WHITESPACE: Final = 64 << 20
"""The longest run of whitespace a trace may hold: no writer puts megabytes of it between two
tokens, and a small gzip that inflates to gigabytes of spaces is refused after this much."""
_NOT_SPACE: Final = re.compile(rb"[^ \t\r\n]")
_TRIES: Final = 4
"""Cuts tried, from the end of the text read, before more is read."""
_NOT_STRUCTURE: Final = bytes(c for c in range(256) if c not in b'"[]{}')
_NESTING: Final = np.zeros(256, dtype=np.int8)
_NESTING[list(b"[{")], _NESTING[list(b"]}")] = 1, -1
_SPACE: Final = b" \t\r\n"


class GiveUp(Exception):
    """The file is not one `stream_events` reads; decode it whole."""


def inflated(
    fh: BinaryIO,
    source: str,
    max_bytes: int,
    read: Callable[[int], None] = lambda n: None,
    *,
    chunk: int = CHUNK,
) -> Iterator[bytes]:
    """The file's JSON bytes, inflated if gzip-compressed, about `chunk` bytes at a time;
    refuses more than `max_bytes`, and more than `MAX_WHITESPACE` bytes of whitespace in a row
    (whole chunks of it). `read` is told how many file bytes each chunk took."""
    yield from _refuse_whitespace(_raw_inflated(fh, source, max_bytes, read, chunk), source)


def _refuse_whitespace(pieces: Iterator[bytes], source: str) -> Iterator[bytes]:
    """`pieces`, refusing a run of whole pieces of whitespace longer than `MAX_WHITESPACE`."""
    run = 0
    for piece in pieces:
        run = run + len(piece) if _NOT_SPACE.search(piece) is None else 0
        if run > MAX_WHITESPACE:
            raise TraceFormatError(
                f"{source}: more than {MAX_WHITESPACE >> 20} MiB of whitespace in a row: not a "
                "trace (a small gzip that inflates to gigabytes of spaces?)"
            )
        yield piece


def _raw_inflated(
    fh: BinaryIO, source: str, max_bytes: int, read: Callable[[int], None], chunk: int
) -> Iterator[bytes]:
    head = fh.read(2)
    total = 0
    if head != b"\x1f\x8b":
        pending = head + fh.read(chunk)
        while pending:
            total += len(pending)
            if total > max_bytes:
                raise TraceFormatError(f"{source}: more than {max_bytes} bytes of JSON")
            read(len(pending))
            yield pending
            pending = fh.read(chunk)
        return
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending = head
    try:
        while True:
            if not pending:
                pending = fh.read(chunk)
                read(len(pending))
                if not pending:
                    break
            if inflater.eof:  # another gzip member follows, or zero padding
                pending = pending.lstrip(b"\0")
                if not pending:
                    continue
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = inflater.decompress(pending, chunk)
            total += len(out)
            if total > max_bytes:
                raise TraceFormatError(
                    f"{source}: inflates to more than {max_bytes} bytes of JSON "
                    "(read_chrome_trace's max_bytes)"
                )
            if out:
                yield out
            pending = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
        if not inflater.eof:
            out = inflater.flush()
            if out:
                yield out
    except zlib.error as error:
        raise TraceFormatError(f"{source}: corrupt gzip data ({error})") from None
    if not inflater.eof:
        raise TraceFormatError(f"{source}: truncated gzip data (the stream ends early)")


def check_depth(raw: bytes | bytearray, source: str, above: int = 0) -> None:
    """TraceFormatError when brackets outside strings nest deeper than `MAX_DEPTH` (counting
    `above` levels that enclose `raw`).

    Scans only the structure: escapes are removed (``\\\\`` then ``\\"``, as JSON reads them
    left to right), then all but quotes and brackets, then empty quote pairs, which leaves
    strings' brackets between quotes and the others outside. About 0.1 s per 60 MB.
    """
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    structure = np.frombuffer(raw.translate(None, _NOT_STRUCTURE).replace(b'""', b""), np.uint8)
    steps = _NESTING[structure]
    quotes = structure == ord('"')
    if quotes.any():
        steps[(np.cumsum(quotes, dtype=np.int64) & 1) == 1] = 0
    if steps.size and np.cumsum(steps, dtype=np.int64).max() + above > MAX_DEPTH:
        raise TraceFormatError(f"{source}: JSON nested deeper than {MAX_DEPTH} levels")


class Stream:
    """The events of a trace read a chunk at a time (`batches`), then its base time."""

    def __init__(self, chunks: Iterator[bytes], source: str) -> None:
        self.chunks, self.source = chunks, source
        self.text, self.at = b"", 0
        self.base_ns = 0
        self._above = 0  # levels that enclose the list of events
        self._members: dict[str, Any] = {}

    @property
    def members(self) -> dict[str, Any]:
        """The trace object's members but its events ({} for a list of events); complete
        once the last batch is out."""
        return {k: v for k, v in self._members.items() if k != "traceEvents"}

    def _more(self) -> bool:
        """Append the next chunk to the text not yet consumed; False at the end of the file."""
        chunk = next(self.chunks, b"")
        if not chunk:
            return False
        self.text = b"".join((memoryview(self.text)[self.at :], chunk))  # one copy, not two
        self.at = 0
        return True

    def _next_char(self) -> int:
        """The first byte at or after `at` that is not whitespace (moves `at` to it); -1 at
        the end of the file."""
        while True:
            text, at = self.text, self.at
            found = _NOT_SPACE.search(text, at)  # not byte by byte: runs can be long
            if found is not None:
                self.at = found.start()
                return text[self.at]
            self.at = len(text)
            if not self._more():
                return -1

    def _start(self) -> None:
        """Move to the first event of the list: the file's top level, or its traceEvents."""
        first = self._next_char()
        if first == ord("["):
            self.at += 1
            return
        if first != ord("{"):
            raise GiveUp
        key = b'"traceEvents"'
        while (found := self.text.find(key, self.at)) < 0:
            if len(self.text) > _HEAD or not self._more():
                raise GiveUp
        head = bytes(self.text[self.at : found])
        self.at = found + len(key)
        if self._next_char() != ord(":"):
            raise GiveUp
        self.at += 1
        if self._next_char() != ord("["):
            raise GiveUp
        self.at += 1
        self._members = self._object(head + b'"traceEvents":[]}')
        self._above = 1

    def _object(self, text: bytes) -> dict[str, Any]:
        """The members of the trace object whose text (less its events) is `text`."""
        try:
            check_depth(text, self.source)
            members = jsonio.loads(text)
        except (ValueError, RecursionError, TraceFormatError):
            raise GiveUp from None
        if not isinstance(members, dict):
            raise GiveUp
        return members

    def batches(self) -> Iterator[list[Any] | NativeBatch]:
        """Lists of events, `Event` structs or plain values, in file order; GiveUp when the
        file is not one this reads. Sets `base_ns` once the last batch is out."""
        self._start()
        while True:
            first = self._next_char()
            if first == ord("]"):
                break
            if first != ord("{"):
                raise GiveUp
            yield self._batch()
            if self._next_char() == ord(","):
                self.at += 1
                if self._next_char() != ord("{"):
                    raise GiveUp
        self.at += 1
        self._finish()

    def _batch(self) -> list[Any] | NativeBatch:
        """The events from `at` to a cut after the last closing brace that parses."""
        while True:
            end = len(self.text)
            for _ in range(_TRIES):
                cut = self.text.rfind(b"}", self.at, end)
                if cut < 0:
                    break
                end = cut
                after = self.text[cut + 1 : cut + 65].lstrip(_SPACE)[:1]
                if after not in (b",", b"]"):
                    continue
                events = self._decode(memoryview(self.text)[self.at : cut + 1])
                if events is not None:
                    self.at = cut + 1
                    return events
            if not self._more():
                raise GiveUp

    def _decode(self, members: memoryview) -> list[Any] | NativeBatch | None:
        """Events of the JSON list whose members' text is `members`; None when it does not
        parse (a cut between events always does)."""
        try:
            events = decode_events(members, MAX_DEPTH - self._above, bracketed=False)
        except msgspec.ValidationError as error:  # numbers beyond float64
            raise TraceFormatError(f"{self.source}: not a JSON trace: {error}") from None
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None
        if isinstance(events, list):  # a NativeBatch's depth is checked; the list's level too
            check_depth(bytes(members), self.source, self._above + 1)
        return events

    def _finish(self) -> None:
        """Read what follows the list of events: nothing, or the rest of the trace object."""
        while self._more():
            pass
        rest = bytes(self.text[self.at :])
        if self._above == 0:
            if rest.strip(_SPACE):
                raise GiveUp
            return
        if b'"traceEvents"' in rest:  # a second list of events: which one counts?
            raise GiveUp
        members = self._object(b'{"traceEvents":[]' + rest)
        self._members.update(members)
        base_ns = self._members.get("baseTimeNanoseconds", 0)
        if not isinstance(base_ns, int) or isinstance(base_ns, bool):
            raise GiveUp
        self.base_ns = base_ns
