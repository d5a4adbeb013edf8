"""Following child processes: ``profile(output=..., follow_children=True)`` (``recfn run -o
traces/``) starts a profile with the same options and output in every child that
``multiprocessing`` starts (fork and spawn, ``ProcessPoolExecutor`` workers included) and in
plain ``os.fork()`` children, each writing its own process folder of the dataset.

A forked child starts its profile from the fork hook; a spawned one (and a forkserver's) from
a stowaway in the data ``multiprocessing`` sends to it, unpickled before the child runs its
target. Either stops its profile from a ``multiprocessing`` finalizer when the child exits,
writing what is left. SIGTERM (``Pool.terminate``, which ``with Pool(...)`` calls on exit) and
SIGHUP stop it too before the child dies of the signal as it would have (a handler the program
installed itself is called instead); a child killed by SIGKILL loses only what it had not
written yet (its parts are written at least every ``flush_interval`` seconds).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any, Optional

_following: Optional[tuple[str, Any]] = None  # output folder, ProfilerConfig
_lock = threading.Lock()
_patched = False
make_profile: Optional[Callable[[str, Any], Any]] = None
"""``(output, config) -> profile`` with ``follow_children=True``; set by ``recfn.capture._profiler``."""


def follow(output: str, config: Any) -> None:
    """Start profiling with ``config`` (a ``ProfilerConfig``) into ``output`` in every child
    process from now on."""
    global _following
    with _lock:
        _following = (output, config)
        _patch_spawn()


def unfollow() -> None:
    global _following
    _following = None


def following() -> Optional[tuple[str, Any]]:
    return _following


class _Child:
    """The profile of this child process (weak-referenceable, for multiprocessing's registry),
    and what an exit signal that came while it was starting left to do once it has."""

    profile: Any = None
    starting = False
    pending: Optional[Callable[[], None]] = None


_child = _Child()


def start_in_child(output: str, config: Any) -> None:
    """Profile this (child) process into ``output`` until it exits, following its children."""
    import atexit

    if make_profile is None:  # pragma: no cover - recfn.capture._profiler sets it on import
        return
    prof = make_profile(output, config)
    _stop_on_signals()  # first: a signal while the profile starts waits for it to have started
    _child.starting = True
    try:
        prof.start()
    except RuntimeError:  # a profiler already runs here (the child started its own)
        return
    finally:
        _child.starting = False
    _child.profile = prof
    _finalize_at_exit()
    atexit.register(_stop)  # children that exit through the interpreter (os.fork, spawn)
    # Stopping at exit may import pandas (pyarrow looks for it); pandas imports this module,
    # which registers with threading and fails once the interpreter is shutting down (3.13).
    import concurrent.futures.thread  # noqa: F401

    pending, _child.pending = _child.pending, None
    if pending is not None:
        pending()


def _finalize_at_exit() -> None:
    """Stop the child's profile when a multiprocessing child exits (it skips atexit); forked
    children clear the finalizers first, so theirs is added again after that."""
    import multiprocessing.util

    if _child.profile is not None:
        multiprocessing.util.Finalize(None, _stop, exitpriority=100)


def _stop() -> None:
    prof = _child.profile
    if prof is not None and prof.running:
        prof.stop()


EXIT_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""The signals that end a process politely: the child stops its profile before dying of them."""


def _stop_on_signals() -> None:
    """Stop the child's profile on ``EXIT_SIGNALS``, then go on as before: call the handler
    that was there, or die of the signal (an ignored signal stays ignored). Python runs signal
    handlers on the main thread only; a handler inherited from ``recfn run`` (which raises in
    the script's process only) counts as none."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in EXIT_SIGNALS:
        previous = signal.getsignal(signum)
        if previous is signal.SIG_IGN:
            continue
        if getattr(previous, "recfn_run_handler", False):
            previous = signal.SIG_DFL
        if isinstance(previous, _ExitHandler):  # inherited from a followed parent
            previous = previous.previous
        signal.signal(signum, _ExitHandler(previous))


class _ExitHandler:
    """The child's handler of one exit signal (see ``_stop_on_signals``)."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, signum: int, frame: Any) -> None:
        if _child.starting:  # stopped, then this, once the profile has started
            _child.pending = lambda: self(signum, frame)
            return
        prof = _child.profile
        if prof is not None and prof.running:
            if prof.stop_later(lambda: self._go_on(signum, frame)):
                return  # a part is being written on this thread: stopped when it is done
            prof.stop()
        self._go_on(signum, frame)

    def _go_on(self, signum: int, frame: Any) -> None:
        previous = self.previous
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # dies of it, as without recfn


class _Stowaway:
    """Rides in the data a spawned child unpickles first; unpickling starts its profile."""

    def __init__(self, output: str, config: Any) -> None:
        self.output = output
        self.config = config

    def __reduce__(self) -> Any:
        return (start_in_child, (self.output, self.config))


def _patch_spawn() -> None:
    """Add the stowaway to ``multiprocessing.spawn.get_preparation_data``, and the exit hook to
    multiprocessing's after-fork work (once)."""
    global _patched
    if _patched:
        return
    import multiprocessing.spawn as spawn

    original = spawn.get_preparation_data

    import multiprocessing.util

    multiprocessing.util.register_after_fork(_child, lambda _: _finalize_at_exit())

    def get_preparation_data(name: str) -> dict[str, Any]:
        data: dict[str, Any] = original(name)
        current = _following
        if current is not None and name != "ignore":  # "ignore": the forkserver itself
            data["recfn_stowaway"] = _Stowaway(*current)
        return data

    spawn.get_preparation_data = get_preparation_data
    _patched = True
