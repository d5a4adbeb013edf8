"""Forwarding recfn ranges and marks to NVTX, so NVIDIA Nsight Systems shows them on its timeline.

``recfn.emit_nvtx()`` (forward only) and ``recfn.profile(nvtx=True)`` (record and forward) run an
``NvtxForwarder``: an engine callback that pushes each range as an NVTX range in the ``"recfn"``
domain on the thread that runs it and pops it when the range ends; ``recfn.mark`` becomes an NVTX
mark. Names follow the legacy profiler's NVTX state: ``"name"``, ``"name, seq = 3"`` when the
range has a sequence number, then ``", sizes = [[2, 3], []]"`` when input shapes are recorded.

NVTX push/pop ranges nest per OS thread, so ranges that do not end where and in the order they
started become NVTX start/end ranges instead: every range started inside a running asyncio event
loop (tasks interleave on one thread), and the rest of a range that leaves its thread still open
(``end_on_future``): its push is popped there and a start/end range of the same name runs on until
the range ends. Each thread's pushes are kept on a stack so that a range ended out of order or from
another thread never unbalances NVTX: its push is popped when a range below it ends.

The ``nvtx`` package (``pip install 'recfn[gpu]'``) is imported on first use. With no NVTX tool
attached (no Nsight, no ``NVTX_INJECTION64_PATH``) nothing is registered and forwarding costs
nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, Optional

from recfn.engine import registry as _registry
from recfn.engine.ranges import RecordFunction, RecordFunctionCallback, _asyncio_loop_running
from recfn.errors import RecfnStateError, RecfnTypeError

DOMAIN = "recfn"
_TRACED = None  # the stack entry of a traced call (trace_calls), which has no RecordFunction

_active: Optional[NvtxForwarder] = None
_active_lock = threading.Lock()


def import_nvtx() -> Any:
    """The ``nvtx`` module, or an ImportError saying how to install it."""
    try:
        import nvtx
    except ImportError as exc:
        raise ImportError(
            "recfn: forwarding ranges to NVTX needs the 'nvtx' package, which is not installed; "
            "install it with: pip install 'recfn[gpu]'",
            name="nvtx",
        ) from exc
    return nvtx


def nvtx_name(name: str, seq_nr: int, shapes: Optional[list[list[int]]]) -> str:
    """The NVTX message of a range: name, then ``seq = N`` and ``sizes = [...]`` when known."""
    text = f"{name}, seq = {seq_nr}" if seq_nr >= 0 else name
    if shapes:
        text += f", sizes = {shapes}"
    return text


def _dims(value: object) -> list[int]:
    """The shape of an array-like input (NumPy, torch, pandas), else ``[]``."""
    shape = getattr(value, "shape", None)
    if shape is None:
        return []
    try:
        return [int(d) for d in shape]
    except (TypeError, ValueError):
        return []


class NvtxForwarder:
    """Forwards ranges (of ``scopes``; None: all) and marks to NVTX while started.

    ``record_shapes`` appends the inputs' shapes to range names. Only one forwarder runs at a
    time in a process: two would forward every range twice.
    """

    def __init__(self, record_shapes: bool, scopes: Optional[Iterable[Any]]) -> None:
        nvtx = import_nvtx()
        domain = nvtx.get_domain(DOMAIN)
        self.attached: bool = isinstance(domain, nvtx.Domain)  # else a no-op stand-in
        self._domain = domain
        self._record_shapes = record_shapes
        self._attributes: dict[str, Any] = {}
        self._local = threading.local()
        self._callback = RecordFunctionCallback(
            self._on_start,
            self._on_end,
            detach=self._on_detach,
            needs_inputs=record_shapes,
            scopes=scopes,
        )
        self._handle = 0

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Begin forwarding (a NVTX mark ``__start_profile`` first). RuntimeError if one runs."""
        global _active
        with _active_lock:
            if _active is not None:
                raise RecfnStateError(
                    "NVTX forwarding is already on (another recfn.emit_nvtx() or "
                    "recfn.profile(nvtx=True) is running); ranges would be forwarded twice"
                )
            _active = self
        if self.attached:
            self.mark("__start_profile")
            self._handle = _registry.add_global_callback(self._callback)

    def stop(self) -> None:
        """Stop forwarding new ranges (those open still pop when they end)."""
        global _active
        if self._handle:
            _registry.remove_callback(self._handle)
            self._handle = 0
            self.mark("__stop_profile")
        with _active_lock:
            if _active is self:
                _active = None

    # -- events -------------------------------------------------------------------------------

    def _attrs(self, message: str) -> Any:
        attrs = self._attributes.get(message)
        if attrs is None:
            attrs = self._domain.get_event_attributes(message=message)
            self._attributes[message] = attrs
        return attrs

    def _stack(self) -> list[Any]:
        """The calling thread's pushes: (range or _TRACED, attributes), innermost last."""
        try:
            stack: list[Any] = self._local.stack
        except AttributeError:
            stack = self._local.stack = []
        return stack

    def _on_start(self, rf: RecordFunction) -> object:
        message = rf.name
        if self._record_shapes or rf.seq_nr >= 0:
            shapes: Optional[list[list[int]]] = None
            inputs = rf.inputs if self._record_shapes else None
            if isinstance(inputs, (list, tuple)):
                shapes = [_dims(value) for value in inputs]
            message = nvtx_name(message, rf.seq_nr, shapes)
        attrs = self._attributes.get(message)
        if attrs is None:
            attrs = self._attrs(message)
        if _asyncio_loop_running():
            return self._domain.start_range(attrs)
        stack = self._stack()
        self._domain.push_range(attrs)
        stack.append((rf, attrs))
        return stack

    def _on_end(self, rf: RecordFunction, ctx: object) -> None:
        if isinstance(ctx, list):
            stack: list[Any] = ctx
            if stack and stack[-1][0] is rf and getattr(self._local, "stack", None) is stack:
                stack.pop()  # the common case: the innermost push of this thread
                self._domain.pop_range()
            elif stack is self._stack():
                self._pop_to(stack, rf)
            # Else it ended on another thread: NVTX pops only the calling thread's ranges, so
            # its push is popped on its own thread when a range below it ends.
        elif isinstance(ctx, int):
            self._domain.end_range(ctx)

    def _on_detach(self, rf: RecordFunction, ctx: object) -> object:
        if isinstance(ctx, list) and ctx is self._stack():
            attrs = self._pop_to(ctx, rf)
            if attrs is not None:
                return self._domain.start_range(attrs)
        return ctx

    def _pop_to(self, stack: list[Any], owner: object) -> Any:
        """Pop the pushes above ``owner``'s and its own; returns its attributes (None: not there)."""
        for i in range(len(stack) - 1, -1, -1):
            if stack[i][0] is owner:
                attrs = stack[i][1]
                for _ in range(len(stack) - i):
                    self._domain.pop_range()
                del stack[i:]
                return attrs
        return None

    def push_traced(self, name: str) -> None:
        """A traced call (trace_calls) starts on this thread."""
        self._domain.push_range(self._attrs(name))
        self._stack().append((_TRACED, None))

    def pop_traced(self) -> None:
        """The innermost traced call of this thread returns."""
        self._pop_to(self._stack(), _TRACED)

    def mark(self, name: str) -> None:
        self._domain.mark(self._attrs(name))


def forward_mark(name: str) -> None:
    """``recfn.mark``: an NVTX mark while a forwarder runs."""
    fwd = _active
    if fwd is not None and fwd.attached:
        fwd.mark(name)


class emit_nvtx:
    """Forward every recfn range and mark to NVTX while the block runs, recording nothing.

    ``with recfn.emit_nvtx(): ...`` under ``nsys profile`` puts the program's ranges on Nsight
    Systems' timeline. ``record_shapes`` appends input shapes to range names; ``record_scopes``
    (None: all) limits forwarding to those scopes; ``enabled=False`` makes it a no-op.
    Raises ImportError without the ``nvtx`` package (``pip install 'recfn[gpu]'``).
    """

    def __init__(
        self,
        enabled: bool = True,
        record_shapes: bool = False,
        record_scopes: Optional[Iterable[Any]] = None,
    ) -> None:
        for field, value in (("enabled", enabled), ("record_shapes", record_shapes)):
            if not isinstance(value, bool):
                raise RecfnTypeError(f"emit_nvtx {field} must be a bool, got {value!r}")
        if isinstance(record_scopes, (str, int)):
            raise RecfnTypeError("emit_nvtx record_scopes must be a collection of RecordScope")
        self.enabled = enabled
        self.record_shapes = record_shapes
        self.record_scopes = None if record_scopes is None else tuple(record_scopes)
        self._forwarder: Optional[NvtxForwarder] = None

    def __enter__(self) -> emit_nvtx:
        if not self.enabled:
            return self
        if self._forwarder is not None:
            raise RecfnStateError("this emit_nvtx() is already entered")
        forwarder = NvtxForwarder(self.record_shapes, self.record_scopes)
        forwarder.start()
        self._forwarder = forwarder
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        forwarder = self._forwarder
        if forwarder is not None:
            self._forwarder = None
            forwarder.stop()
