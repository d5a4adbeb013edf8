"""Python stacks at the cost of a pointer: capture raw frames now, format them once, later.

Compiled with mypyc. A captured stack is one node of a ``FrameTable``: a trie of
``(code object, instruction offset)`` pairs, outermost at the root, so events with a common
prefix share its nodes and a stack costs one integer. Each thread keeps the frames of its last
capture (``StackCache``); a new capture walks only the frames below the first one it already
knows (same frame object at the same offset: everything above it is unchanged), so capturing in
a loop touches one or two frames whatever the depth. ``symbolize`` turns nodes into
``file:line(function)`` lists once per node, when the table is built.

Frames of recfn's own modules and of ``contextlib`` are left out, as they always were.
"""

from __future__ import annotations

import sys
import threading
from types import CodeType, FrameType
from typing import Final, Optional

from librt.vecs import append, vec
from mypy_extensions import i64

from recfn.errors import RecfnTypeError

NO_STACK: Final[i64] = -1  # the node of an empty stack
KEEP: Final[i64] = 0
SKIP: Final[i64] = 1  # recfn's and contextlib's frames
RESUMABLE: Final[i64] = 2  # generators and coroutines: resumed from other callers, never reused
RESUMABLE_FLAGS: Final = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR


def _excluded_module(name: object) -> bool:
    if not isinstance(name, str):
        return False
    return name == "recfn" or name.startswith("recfn.") or name == "contextlib"


class StackCache:
    """One thread's last captured stack, outermost first: frames, their offsets and nodes.

    It holds the frames of that capture (so their identity stays valid) until the next capture
    on the thread replaces them or the table is released.
    """

    frames: list[object]
    lastis: vec[i64]
    nodes: vec[i64]
    where: dict[int, i64]  # id(frame) -> its position in ``frames``

    def __init__(self) -> None:
        self.frames = []
        self.lastis = vec[i64]()
        self.nodes = vec[i64]()
        self.where = {}

    def truncate(self, n: i64) -> None:
        """Keep the ``n`` outermost entries."""
        frames = self.frames
        if len(frames) <= n:
            return
        while len(frames) > n:
            f = frames.pop()
            self.where.pop(id(f), None)
        self.lastis = self.lastis[:n]
        self.nodes = self.nodes[:n]


class FrameTable:
    """Interned stacks: node ``k`` is frame ``(codes[k], lastis[k])`` called from ``parents[k]``."""

    parents: vec[i64]
    codes: list[object]
    lastis: vec[i64]
    index: dict[tuple[i64, int, i64], i64]  # (parent, id(code), offset) -> node
    kinds: dict[int, i64]  # id(code) -> KEEP, SKIP or RESUMABLE
    keep: list[object]  # the codes ``kinds`` holds ids of, alive so ids stay unique
    local: threading.local
    _lock: threading.Lock

    def __init__(self) -> None:
        self.parents = vec[i64]()
        self.codes = []
        self.lastis = vec[i64]()
        self.index = {}
        self.kinds = {}
        self.keep = []
        self.local = threading.local()
        self._lock = threading.Lock()

    def thread_cache(self) -> StackCache:
        cache: Optional[StackCache] = getattr(self.local, "cache", None)
        if cache is None:
            cache = StackCache()
            self.local.cache = cache
        return cache

    def _kind(self, frame: FrameType, code: CodeType) -> i64:
        key = id(code)
        known = self.kinds.get(key)
        if known is not None:
            return known
        kind = KEEP
        if _excluded_module(frame.f_globals.get("__name__", "")):
            kind = SKIP
        elif code.co_flags & RESUMABLE_FLAGS:
            kind = RESUMABLE
        with self._lock:
            self.kinds[key] = kind
            self.keep.append(code)
        return kind

    def _node(self, parent: i64, code: CodeType, lasti: i64) -> i64:
        key = (parent, id(code), lasti)
        node = self.index.get(key)
        if node is not None:
            return node
        with self._lock:
            node = self.index.get(key)
            if node is None:
                node = i64(len(self.codes))
                self.parents = append(self.parents, parent)
                self.codes.append(code)
                self.lastis = append(self.lastis, lasti)
                self.index[key] = node
        return node

    def capture(self, frame: Optional[FrameType], cache: StackCache) -> i64:
        """The node of the stack from ``frame`` outwards (recfn's and contextlib's frames left
        out), reusing what ``cache`` knows of this thread's previous capture."""
        walked: Optional[list[FrameType]] = (
            None  # frames below the first known one, innermost first
        )
        base: i64 = NO_STACK
        keep: i64 = 0  # entries of the cache that stay (the shared outer part)
        where = cache.where
        while frame is not None:
            kind = self._kind(frame, frame.f_code)
            if kind != SKIP:
                if kind == KEEP:
                    # the same running frame at the same offset: its callers are unchanged
                    pos = where.get(id(frame))
                    if (
                        pos is not None
                        and cache.frames[pos] is frame
                        and cache.lastis[pos] == frame.f_lasti
                    ):
                        base = cache.nodes[pos]
                        keep = pos + 1
                        break
                if walked is None:
                    walked = [frame]
                else:
                    walked.append(frame)
            frame = frame.f_back
        cache.truncate(keep)
        if walked is None:
            return base
        node = base
        i: i64 = len(walked) - 1
        while i >= 0:
            f = walked[i]
            code = f.f_code
            lasti: i64 = f.f_lasti  # unchanged: these frames wait on the calls below them
            node = self._node(node, code, lasti)
            if self.kinds[id(code)] == KEEP:
                where[id(f)] = i64(len(cache.frames))
            cache.frames.append(f)
            cache.lastis = append(cache.lastis, lasti)
            cache.nodes = append(cache.nodes, node)
            i -= 1
        return node

    def forget_frames(self) -> None:
        """Drop the calling thread's cached frames (they keep their locals alive)."""
        self.local.cache = None

    def symbolize(self, nodes: list[i64]) -> list[list[str]]:
        """Each node's stack as ``file:line(function)`` strings, outermost first."""
        memo: dict[i64, list[str]] = {}
        lines: dict[tuple[int, i64], str] = {}
        out: list[list[str]] = []
        for node in nodes:
            out.append(self._frames_of(node, memo, lines))
        return out

    def _frames_of(
        self, node: i64, memo: dict[i64, list[str]], lines: dict[tuple[int, i64], str]
    ) -> list[str]:
        if node < 0:
            return []
        known = memo.get(node)
        if known is not None:
            return known
        chain: list[i64] = []  # this node and its unknown ancestors, innermost first
        n = node
        base: list[str] = []
        while n >= 0:
            found = memo.get(n)
            if found is not None:
                base = found
                break
            chain.append(n)
            n = self.parents[n]
        result = base
        i: i64 = len(chain) - 1
        while i >= 0:
            k = chain[i]
            code = self.codes[k]
            assert isinstance(code, CodeType)
            result = [*result, _describe(code, self.lastis[k], lines)]
            memo[k] = result
            i -= 1
        return result


def _describe(code: CodeType, lasti: i64, lines: dict[tuple[int, i64], str]) -> str:
    key = (id(code), lasti)
    text = lines.get(key)
    if text is None:
        text = f"{code.co_filename}:{_line_of(code, lasti)}({code.co_name})"
        lines[key] = text
    return text


def _line_of(code: CodeType, lasti: i64) -> object:
    """The line a frame at byte offset ``lasti`` reports as ``f_lineno`` (``None`` if none)."""
    if lasti < 0:
        return code.co_firstlineno
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line
    return None


class CapturedTraceback:
    """A Python stack captured by ``gather_traceback``: a node of a shared frame table."""

    table: FrameTable
    node: i64

    def __init__(self, table: FrameTable, node: i64) -> None:
        self.table = table
        self.node = node

    def __repr__(self) -> str:
        return f"<CapturedTraceback of {len(self.table.symbolize([self.node])[0])} frames>"


_shared: Final = FrameTable()


def gather_traceback() -> CapturedTraceback:
    """Capture the caller's Python stack cheaply (no strings): symbolize it later."""
    try:
        frame: Optional[FrameType] = sys._getframe(0)  # compiled: the nearest Python frame
    except ValueError:
        frame = None
    return CapturedTraceback(_shared, _shared.capture(frame, _shared.thread_cache()))


def symbolize_tracebacks(tracebacks: object) -> list[list[str]]:
    """The frames of each ``CapturedTraceback`` as ``file:line(function)``, outermost first."""
    if not isinstance(tracebacks, (list, tuple)):
        raise RecfnTypeError(
            f"symbolize_tracebacks takes a list of CapturedTraceback, got {type(tracebacks).__name__}"
        )
    out: list[list[str]] = []
    for tb in tracebacks:
        if not isinstance(tb, CapturedTraceback):
            raise RecfnTypeError(
                f"symbolize_tracebacks takes CapturedTraceback objects, got {type(tb).__name__}"
            )
        out.append(tb.table.symbolize([tb.node])[0])
    return out
