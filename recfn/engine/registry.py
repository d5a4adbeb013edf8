"""The callback registry and the enabled flag: adding, removing and switching callbacks, guards.

Compiled with mypyc. Writers build new lists under the engine's lock and publish them whole, so
``recfn.engine.ranges`` can iterate them without locking on the hot path. Thread-local changes (add,
remove, clear, disable, re-enable, the enabled flag) build a new ``_ThreadState`` for the calling
context only: a copy made by a task or by ``propagate`` never changes its parent's. The fast-path
count is never adjusted here: global changes re-derive it, thread-local states count themselves.
"""

from __future__ import annotations

import warnings

from mypy_extensions import i64

from recfn.engine.ranges import (
    RecordFunctionCallback,
    _draw_countdown,
    _Entry,
    _lock,
    _recount,
    _reg,
    _rng,
    _state_var,
    _ThreadState,
)
from recfn.errors import RecfnTypeError


def _new_handle() -> i64:
    _reg.next_callback_handle += 1
    return _reg.next_callback_handle


def _check_callback(cb: object) -> RecordFunctionCallback:
    if not isinstance(cb, RecordFunctionCallback):
        raise RecfnTypeError(f"expected a RecordFunctionCallback, got {type(cb).__name__}")
    return cb


def add_global_callback(cb: object) -> int:
    """Register ``cb`` for every thread; returns its handle (monotonic, never 0)."""
    callback = _check_callback(cb)
    with _lock:
        entry = _Entry(_new_handle(), callback, True)
        _reg.global_entries = _reg.global_entries + [entry]
        _recount()
    return entry.handle


def add_thread_local_callback(cb: object) -> int:
    """Register ``cb`` for this thread (and the asyncio tasks and propagated work it starts)."""
    callback = _check_callback(cb)
    with _lock:
        entry = _Entry(_new_handle(), callback, False)
        _reg.state_touched = True
    ts = _state_var.get()
    _state_var.set(_ThreadState(ts.entries + [entry], ts.enabled))
    return entry.handle


def _check_handle(handle: object) -> int:
    if isinstance(handle, bool) or not isinstance(handle, int):
        raise RecfnTypeError(f"callback handle must be an int, got {type(handle).__name__}")
    return handle


def _unknown_handle(handle: object, action: str, stacklevel: int = 3) -> None:
    warnings.warn(
        f"recfn: cannot {action} callback handle {handle}: no such callback",
        stacklevel=stacklevel,
    )


def remove_callback(handle: object) -> None:
    """Remove a callback by handle (thread-local ones only from this context)."""
    handle = _check_handle(handle)
    ts = _state_var.get()
    kept = [e for e in ts.entries if e.handle != handle]
    if len(kept) != len(ts.entries):
        _state_var.set(_ThreadState(kept, ts.enabled))
        return
    with _lock:
        kept = [e for e in _reg.global_entries if e.handle != handle]
        if len(kept) != len(_reg.global_entries):
            _reg.global_entries = kept
            _recount()
            return
    _unknown_handle(handle, "remove")


def _switch(handle: object, enabled: bool, action: str) -> None:
    """Disable or re-enable: a thread-local entry is replaced in this context's state only."""
    handle = _check_handle(handle)
    ts = _state_var.get()
    for i, e in enumerate(ts.entries):
        if e.handle == handle:
            if e.enabled != enabled:
                entries = list(ts.entries)
                entries[i] = e.switched(enabled)
                _state_var.set(_ThreadState(entries, ts.enabled))
            return
    with _lock:
        for e in _reg.global_entries:
            if e.handle == handle:
                e.enabled = enabled
                _recount()  # the plain entry depends on it
                return
    _unknown_handle(handle, action, 4)


def disable_callback(handle: object) -> None:
    """Stop a callback from running without removing it (a thread-local one in this context)."""
    _switch(handle, False, "disable")


def reenable_callback(handle: object) -> None:
    """Let a disabled callback run again (a thread-local one in this context)."""
    _switch(handle, True, "re-enable")


def has_global_callbacks() -> bool:
    return len(_reg.global_entries) > 0


def has_thread_local_callbacks() -> bool:
    return len(_state_var.get().entries) > 0


def has_callbacks() -> bool:
    return has_global_callbacks() or has_thread_local_callbacks()


def clear_global_callbacks() -> None:
    """Remove every global callback."""
    with _lock:
        _reg.global_entries = []
        _recount()


def clear_thread_local_callbacks() -> None:
    """Remove this context's thread-local callbacks."""
    ts = _state_var.get()
    if ts.entries:
        _state_var.set(_ThreadState([], ts.enabled))


def clear_callbacks() -> None:
    """Remove global callbacks and this context's thread-local ones."""
    clear_global_callbacks()
    clear_thread_local_callbacks()


def set_record_function_seed_for_testing(seed: object) -> None:
    """Make sampling reproducible: reseed and redraw every registered countdown."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise RecfnTypeError(f"seed must be an int, got {type(seed).__name__}")
    _rng.seed(seed)
    for e in _reg.global_entries + _state_var.get().entries:
        e.countdown = _draw_countdown(e.cb.sampling_prob)


# -- enabled flag and guards --------------------------------------------------------------------


def enable_record_function(enable: object = True) -> None:
    """Turn ranges on or off for this thread / task context."""
    _reg.state_touched = True
    ts = _state_var.get()
    if ts.enabled != bool(enable):
        _state_var.set(_ThreadState(ts.entries, bool(enable)))


def is_record_function_enabled() -> bool:
    return _state_var.get().enabled


class RecordFunctionGuard:
    """Set the enabled flag for a block and restore the previous value on exit."""

    enabled: bool
    _previous: list[bool]

    def __init__(self, enabled: object = True) -> None:
        self.enabled = bool(enabled)
        self._previous = []

    def __enter__(self) -> RecordFunctionGuard:
        self._previous.append(is_record_function_enabled())
        enable_record_function(self.enabled)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        enable_record_function(self._previous.pop())


class DisableRecordFunctionGuard(RecordFunctionGuard):
    """Turn ranges off for a block."""

    def __init__(self) -> None:
        super().__init__(False)
