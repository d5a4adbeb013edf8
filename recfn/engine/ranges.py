"""The RecordFunction engine: ranges, callbacks, sampling, guards and context.

Compiled with mypyc. The hot path is ``with record_function("x"):`` from uncompiled code: with no
callback registered it costs one field test; with callbacks it selects them (scope filter,
geometric-countdown sampling), links the range to its parent (a per-thread stack, or a ContextVar
inside a running event loop so asyncio tasks nest separately), and calls each callback's
``on_start``/``on_end`` through a native vtable, so the profiler (a subclass of
``RecordFunctionCallback``) is called without any Python-level dispatch. When the only callback
is a profiler with native rows that needs nothing per range (``_reg.plain``, derived with the
count), with-blocks and decorators skip selection and dispatch: they keep the stack here and
open and close the row through ``recfn.native._crange`` (the range fast path), nesting in the
task's links inside an event loop; anything else a range can meet (args, ends out of order,
futures) takes the path below.

Thread-local callbacks and the enabled flag live in an immutable ``_ThreadState`` held by a
ContextVar: threads start with their own, asyncio tasks get a copy, ``propagate`` carries it, and a
change made in a copy builds a new state, never touching the original's. The fast-path count is
derived, never incremented per operation: global entries plus live non-empty thread-local states
(each state counts itself while it lives), so it cannot drift from the registrations.

Open ranges: outside an event loop each thread keeps a list of its open ranges, innermost last; a
range leaves it when it ends, in any order, so no chain of links is ever walked. Inside a loop the
ContextVar holds a ``_TaskStack``, the same list for the running task: a task made while a range
is open copies the context, so it starts under that range. A ContextVar write per range (about
two thirds of a range's cost in a loop) is what a per-task stack saves: where
``recfn.native._crange`` can tell that no other context can see the stack (none was copied from
this one and no ContextVar was set since the stack was made current), a range pushes onto it in
place; otherwise it makes a copy of the stack's open ranges current first. Each entry keeps the run
of its range, so an entry left in a copy after its range ended is skipped even if the range
object is entered again. Both lists can only be walked for as many steps as they are deep. A range
started with ``before()`` is held weakly by both, so one that is dropped without ``end()`` is
collected and ended then.
"""

from __future__ import annotations

import _thread
import contextvars
import logging
import math
import os
import random
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any, Final, Optional, cast

from librt.vecs import vec
from mypy_extensions import i32, i64, mypyc_attr

from recfn import native
from recfn.engine.scope import NUM_SCOPES, SCOPE_USER, RecordScope, as_scope
from recfn.errors import RecfnStateError, RecfnTypeError, RecfnValueError
from recfn.native.constants import META_DEPTH_SHIFT, ROW_ARGS_LOOP

_log: Final = logging.getLogger("recfn")

ALL_SCOPES_MASK: Final[i64] = (1 << NUM_SCOPES) - 1
TID_SHIFT: Final = (
    32  # a range or event id is (thread id << TID_SHIFT) | per-thread sequence number
)
_SCOPES: Final = tuple(RecordScope)
# Until asyncio is imported, each range asks sys.modules for it: one module lookup fewer.
_modules: Final = sys.modules


def _no_thread() -> object:
    return None


def _no_set_thread(td: object) -> None:
    pass


def _no_open_row(rows: object, key: object, name: str) -> bool:
    raise RecfnStateError("recfn.native._crange is not built")


def _no_close_row(rows: object, key: object, bits: int) -> None:
    raise RecfnStateError("recfn.native._crange is not built")


_crange: Final[Any] = native.extension("_crange")
_ccall: Final[Any] = native.extension("_ccall")
_UNSELECTED: Final = object()  # RecordFunction(_UNSELECTED): begin_range's range, not selected
# Final bindings: compiled code calls them as statics, without a module attribute lookup.
_fast_thread: Final[Callable[[], object]] = _crange.thread if _crange is not None else _no_thread
_set_fast_thread: Final[Callable[[object], None]] = (
    _crange.set_thread if _crange is not None else _no_set_thread
)
_open_row: Final[Callable[[object, object, str], bool]] = (
    _crange.open_row if _crange is not None else _no_open_row
)
_native_in_loop: Final[Callable[[], bool]] = _crange.in_loop if _crange is not None else bool
_close_row: Final[Callable[[object, object, int], None]] = (
    _crange.close_row if _crange is not None else _no_close_row
)
# Absent in the pure build and where CPython lays a Context out differently: every range in an
# event loop then makes a copy of its task's stack current, and its end resets the ContextVar.
_private_value: Final[Optional[Callable[[object], object]]] = getattr(
    _crange, "private_value", None
)
_claim: Final[Optional[Callable[[object], None]]] = getattr(_crange, "claim", None)
_current_context: Final[Optional[Callable[[], object]]] = getattr(_crange, "current_context", None)


class RecordFunctionCallback:
    """A pair of start/end callables plus the filters that decide when they run.

    ``start(rf)`` may return an observer context; it is handed to ``end(rf, ctx)`` for the same
    range. ``detach(rf, ctx)``, when given, runs on the starting thread when a range leaves it
    still open (``end_on_future``) and returns the context ``end`` then gets. ``sampling_prob`` samples ranges (start and end of one range together); ``scopes``
    (empty: all) filters by ``RecordScope``; ``should_run()`` is asked before sampling.
    ``needs_inputs``/``needs_outputs``/``needs_ids`` tell callers what to compute.
    """

    start: Optional[Callable[[RecordFunction], object]]
    end: Optional[Callable[[RecordFunction, object], object]]
    detach: Optional[Callable[[RecordFunction, object], object]]
    needs_inputs: bool
    needs_outputs: bool
    needs_ids: bool
    sampling_prob: float
    scopes: frozenset[RecordScope]
    should_run: Optional[Callable[[], bool]]
    scope_mask: i64
    # Set by a profiler whose rows are native (recfn.native._crange): when it is the only callback, a
    # with-block range writes its row from the engine without calling on_start/on_end.
    fast_rows: bool

    def __init__(
        self,
        start: Any = None,
        end: Any = None,
        *,
        needs_inputs: object = False,
        needs_outputs: object = False,
        needs_ids: object = False,
        sampling_prob: object = 1.0,
        scopes: Any = None,
        should_run: Any = None,
        detach: Any = None,
    ) -> None:
        if start is not None and not callable(start):
            raise RecfnTypeError(f"start must be callable or None, got {type(start).__name__}")
        if end is not None and not callable(end):
            raise RecfnTypeError(f"end must be callable or None, got {type(end).__name__}")
        if detach is not None and not callable(detach):
            raise RecfnTypeError(f"detach must be callable or None, got {type(detach).__name__}")
        if should_run is not None and not callable(should_run):
            raise RecfnTypeError(
                f"should_run must be callable or None, got {type(should_run).__name__}"
            )
        prob = _check_prob(sampling_prob)
        self.start = start
        self.end = end
        self.detach = detach
        self.needs_inputs = bool(needs_inputs)
        self.needs_outputs = bool(needs_outputs)
        self.needs_ids = bool(needs_ids)
        self.sampling_prob = prob
        self.should_run = should_run
        chosen = frozenset(as_scope(s) for s in (scopes or ()))
        self.scopes = chosen
        mask: i64 = 0
        for s in chosen:
            mask |= i64(1) << int(s)
        self.scope_mask = mask if chosen else ALL_SCOPES_MASK
        self.fast_rows = False

    def on_start(self, rf: RecordFunction) -> object:
        """Run the start callable; subclasses (the profiler) override this natively."""
        fn = self.start
        if fn is None:
            return None
        return fn(rf)

    def on_end(self, rf: RecordFunction, ctx: object) -> None:
        """Run the end callable with the context ``on_start`` returned."""
        fn = self.end
        if fn is not None:
            fn(rf, ctx)

    def on_detach(self, rf: RecordFunction, ctx: object) -> object:
        """Run the detach callable; returns the context the end callable will get."""
        fn = self.detach
        if fn is None:
            return ctx
        return fn(rf, ctx)

    def __repr__(self) -> str:
        return (
            f"RecordFunctionCallback(start={self.start!r}, end={self.end!r}, "
            f"sampling_prob={self.sampling_prob}, scopes={sorted(s.name for s in self.scopes)})"
        )


def _check_prob(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecfnTypeError(f"sampling_prob must be a number in [0, 1], got {value!r}")
    if not 0 <= value <= 1:  # compared before float(), which overflows on huge ints
        raise RecfnValueError(f"sampling_prob must be in [0, 1], got {value!r}")
    return float(value)


class _Entry:
    """A registered callback: its handle, on/off switch, sampling countdown and error state."""

    handle: i64
    cb: RecordFunctionCallback
    enabled: bool
    countdown: i64
    failures: i64
    is_global: bool

    def __init__(self, handle: i64, cb: RecordFunctionCallback, is_global: bool) -> None:
        self.handle = handle
        self.cb = cb
        self.enabled = True
        self.failures = 0
        self.is_global = is_global
        self.countdown = _draw_countdown(cb.sampling_prob)

    def switched(self, enabled: bool) -> _Entry:
        """A copy with ``enabled`` set: how a context changes a thread-local entry by value."""
        e = _Entry(self.handle, self.cb, self.is_global)
        e.enabled = enabled
        e.countdown = self.countdown
        e.failures = self.failures
        return e

    def selected(self, scope: i64) -> bool:
        """Whether this callback runs for a new range of ``scope`` (advances sampling)."""
        if not self.enabled:
            return False
        cb = self.cb
        if not (cb.scope_mask >> scope) & 1:
            return False
        should_run = cb.should_run
        if should_run is not None:
            try:
                if not should_run():
                    return False
            except Exception:
                self.report_failure("should_run")
                return False
        if cb.sampling_prob < 1.0:
            self.countdown -= 1
            if self.countdown > 0:
                return False
            self.countdown = _draw_countdown(cb.sampling_prob)
        return True

    def report_failure(self, where: str) -> None:
        self.failures += 1
        if self.failures == 1:
            _log.warning(
                "recfn callback %r raised in %s; it keeps running, further errors are counted",
                self.cb,
                where,
                exc_info=True,
            )


_rng: random.Random = random.Random()
_NEVER: Final[i64] = 1 << 62


def _draw_countdown(prob: float) -> i64:
    """Ranges until the next sampled one: a geometric draw, so skipping costs one decrement."""
    if prob >= 1.0:
        return 1
    if prob <= 0.0:
        return _NEVER
    u = 1.0 - _rng.random()  # in (0, 1]
    n = math.floor(math.log(u) / math.log1p(-prob)) + 1
    return i64(min(n, _NEVER))


class _ThreadState:
    """What follows the context: thread-local callbacks and the enabled flag (immutable).

    A state with entries counts itself in the fast-path count from creation until it is
    collected, so the count follows exactly the states some context can still see.
    """

    entries: list[_Entry]
    enabled: bool
    counted: bool

    def __init__(self, entries: list[_Entry], enabled: bool) -> None:
        self.entries = entries
        self.enabled = enabled
        self.counted = len(entries) > 0
        if self.counted:
            with _lock:
                _reg.n_local_states += 1
                _recount()

    def __del__(self) -> None:
        if self.counted:
            self.counted = False
            with _lock:
                _reg.n_local_states -= 1
                _recount()


class _ThreadData:
    """Per-OS-thread facts: the logical id, name, a counter for range handles, the open ranges."""

    tid: i64
    name: str
    next_seq: i64
    # Ranges open on this thread outside an event loop, innermost last, in stack[0:top]: each a
    # RecordFunction, a weak reference to the _Abandon of one started with before(), or None for
    # one that ended out of order. Slots are reused, never shrunk, so a push costs no allocation;
    # only this thread moves ``top``, other threads only write None over their own range's slot.
    stack: list[object]
    top: i64
    sink: object  # the profiler's buffer for this thread, owned by recfn.capture._recorder
    # Set by a fast-rows profiler when it makes this thread's buffer: the callback, its native
    # rows (a recfn.native._crange.Rows) and, with with_stack, what records a fast range's stack.
    rows_owner: object
    rows: object
    rows_stack: Optional[Callable[[], object]]
    # The task stack this thread last made current and claimed (recfn.native._crange.claim):
    # the fast path pushes on it when _crange.thread() finds it private (ROW_ARGS_LOOP 2).
    claimed: Optional[_TaskStack]
    # The seq, parent seq and meta of the next row this thread opens: the Rows reads them
    # through the buffer protocol, so they are never boxed; then whether an event loop runs on
    # the thread, which recfn.native._crange.thread() writes (ROW_ARGS_LOOP). Never resized.
    row_args: vec[i64]

    def __init__(self, tid: i64, name: str) -> None:
        self.tid = tid
        self.name = name
        self.next_seq = 0
        self.stack = []
        self.top = 0
        self.sink = None
        self.rows_owner = None
        self.rows = None
        self.rows_stack = None
        self.claimed = None
        self.row_args = vec[i64]([0, 0, 0, 0])


class _TaskStack:
    """The open ranges of one asyncio task, innermost last in ``entries[0:top]``: each a
    RecordFunction, a weak reference to the _Abandon of one started with before(), or None for
    one that ended out of order, with the run of its range when it was pushed. Changed in place
    only by the context that made it current, while no other can see it (``_private_value``);
    a range that ends may also clear its slot in the copy current in its task."""

    entries: list[object]
    runs: list[int]
    top: i64
    context: object  # the Context it was made current in (None in the pure build)
    token: object  # the pure build: the ContextVar.set that made it current, reset at the end

    def __init__(self, entries: list[object], runs: list[int]) -> None:
        self.entries = entries
        self.runs = runs
        self.top = len(entries)
        self.context = None
        self.token = None


@mypyc_attr(native_class=False)
class _Abandon:
    """Held only by a range started with ``before()`` (which holds it back): the engine refers to
    it weakly, so when the user drops the range the pair is collected and this ends the range."""

    def __init__(self, rf: RecordFunction) -> None:
        self.rf = rf
        self.ref = weakref.ref(self)  # what the stack or link holds instead of the range

    def __del__(self) -> None:
        rf: RecordFunction = self.rf
        extra = rf._extra
        if extra is not None and extra.abandon is self and rf._state == 1:
            rf._finish(True, True)


class _RangeExtra:
    """A range's rarely used fields, kept apart: a range that needs none of them (nothing
    listens, the profiler's fast path) makes and frees one reference instead of seven, each of
    them a reference count of None to update per range on Python 3.11."""

    inputs: object = None  # handed to start callbacks (needs_inputs), during the start only
    kwinputs: object = None
    outputs: object = None  # set_outputs (needs_outputs), for end callbacks
    pending_inputs: object = None  # record_function_fast's inputs, handed at each entry
    pending_kwinputs: object = None
    more: Optional[list[object]] = None  # the callbacks after the first, each with its context
    abandon: Optional[_Abandon] = None  # started with before(): ends it if it is collected


_EMPTY_STATE: Final = _ThreadState([], True)
_state_var: Final[contextvars.ContextVar[_ThreadState]] = contextvars.ContextVar(
    "recfn_thread_state", default=_EMPTY_STATE
)
_current_var: Final[contextvars.ContextVar[Optional[_TaskStack]]] = contextvars.ContextVar(
    "recfn_current_range", default=None
)
# Bound once: compiled code would look each ContextVar method up by name at every call.
_state_get: Final[Callable[[], _ThreadState]] = _state_var.get
_current_get: Final[Callable[[], Optional[_TaskStack]]] = _current_var.get
_current_set: Final[Callable[[Optional[_TaskStack]], contextvars.Token[Optional[_TaskStack]]]] = (
    _current_var.set
)
_current_reset: Final[Callable[[contextvars.Token[Optional[_TaskStack]]], None]] = (
    _current_var.reset
)
_thread_local: Final = threading.local()
# recfn.native._crange keeps each thread's data by thread state: where threading.local was patched to
# hold one per greenlet (gevent), the fast path would find another greenlet's, so it is not told.
_THREAD_LOCAL_IS_THREADS: Final = type(_thread_local) is _thread._local
_lock: Final = threading.RLock()
# A fork while another thread holds the lock would leave it held forever in the child.
os.register_at_fork(
    before=_lock.acquire, after_in_parent=_lock.release, after_in_child=_lock.release
)


class _EngineState:
    """Process-wide engine state, in one native object: its fields read as fast as C statics
    (plain module globals would be dict lookups in compiled code)."""

    global_entries: list[_Entry]  # never mutated once published: writers build a new list
    n_local_states: i64  # live _ThreadStates with entries (each counts itself while it lives)
    # The fast path's test, derived by _recount: global entries + n_local_states. 0 means no
    # callback can run anywhere.
    n_callbacks: i64
    state_touched: bool  # once any context has had a thread-local change, read _state_var
    next_callback_handle: i64
    next_tid: i64
    loop_probe: Optional[Callable[[], object]]  # asyncio's _get_running_loop, once imported
    # Derived by _recount: the one global entry when it is a fast-rows profiler that runs for
    # every range (enabled, no thread-local states): with-blocks and decorators then take the
    # fast path. ``allow_fast`` (on by default) lets tests turn that path off.
    plain: Optional[_Entry]
    allow_fast: bool

    def __init__(self) -> None:
        self.global_entries = []
        self.n_local_states = 0
        self.n_callbacks = 0
        self.plain = None
        self.allow_fast = True
        self.state_touched = False
        self.next_callback_handle = 0
        self.next_tid = 0
        self.loop_probe = None


_reg: Final = _EngineState()


def _recount() -> None:
    """Derive the fast-path count and the plain entry from the registrations (call with
    ``_lock`` held, after any change of them or of a global entry's ``enabled``)."""
    entries = _reg.global_entries
    _reg.n_callbacks = len(entries) + _reg.n_local_states
    plain: Optional[_Entry] = None
    if _reg.allow_fast and len(entries) == 1 and _reg.n_local_states == 0:
        e = entries[0]
        cb = e.cb
        if e.enabled and cb.fast_rows:  # set only when it needs nothing per range
            plain = e
    _reg.plain = plain


def set_fast_path(allowed: bool) -> None:
    """Allow or forbid the native range fast path (tests compare both paths' tables)."""
    with _lock:
        _reg.allow_fast = allowed
        _recount()


def _thread_data() -> _ThreadData:
    try:
        td: _ThreadData = _thread_local.data
        return td
    except AttributeError:
        return _new_thread_data()


def _new_thread_data() -> _ThreadData:
    current = threading.current_thread()
    with _lock:
        _reg.next_tid += 1
        td = _ThreadData(_reg.next_tid, current.name)
    _thread_local.data = td
    if _THREAD_LOCAL_IS_THREADS:
        _set_fast_thread(td)
    return td


def current_thread_id() -> int:
    """The logical id of the calling thread (1, 2, ...; never reused within the process)."""
    return _thread_data().tid


@mypyc_attr(free_list_len=1)  # a range made and dropped per with-block reuses one object
class RecordFunction:
    """One range: the seed's ``at::RecordFunction``.

    ``RecordFunction(scope)`` decides which callbacks run (``is_active``); ``before(name, ...)``
    runs their start callbacks and makes the range current; ``end()`` runs their end callbacks.
    A range started with ``before()`` and dropped without ``end()`` is ended when it is
    collected: its end callbacks run then (the profiler records that moment as its end).
    """

    name: str = ""
    _scope: i32 = 0
    seq_nr: i64 = -1
    handle: i64 = 0
    depth: i32 = 0
    forward_thread_id: i64 = 0
    debug_handle: i64 = -1
    is_async: bool = False
    _state: i32 = -1  # -1 inactive, 0 callbacks selected, 1 started, 2 ended
    _in_start: bool = False
    _needs_inputs: bool = False
    _needs_outputs: bool = False
    _needs_ids: bool = False
    _args: object = None
    _parent: Optional[RecordFunction] = None  # the enclosing range when this one started
    _parent_run: i64 = 0  # which run of _parent that was (the object may be reused since)
    _run: i64 = 0  # starts of this object so far: a reused range is a new run
    _td: Optional[_ThreadData] = None
    _e0: Optional[_Entry] = None
    _c0: object = None
    _extra: Optional[_RangeExtra] = None
    _future_end: bool = False
    _task: Optional[_TaskStack] = None  # the task stack it was pushed on, inside an event loop
    _on_stack: bool = False  # open on its thread's stack
    _fast: bool = False  # started by _fast_begin: its row is native, opened without on_start
    # Fields owned by the profiler (recfn.capture._recorder): where this range's row lives.
    sink_chunk: object = None
    sink_row: i64 = -1
    sink_start: i64 = 0

    def __init__(self, scope: object = RecordScope.FUNCTION) -> None:
        if scope is _UNSELECTED:
            return  # begin_range sets the scope and takes the fast path or selects itself
        if isinstance(scope, int) and not isinstance(scope, bool) and 0 <= scope < NUM_SCOPES:
            self._scope = scope
        else:
            self._scope = int(as_scope(scope))
        self._select()

    def _select(self) -> None:
        """Pick the callbacks that run for this range; leaves ``_state`` 0 when any does."""
        if _reg.n_callbacks == 0:
            return
        scope = i64(self._scope)
        if _reg.state_touched:
            ts = _state_get()
            if not ts.enabled:
                return
            for e in _reg.global_entries:
                if e.selected(scope):
                    self._take(e)
            for e in ts.entries:
                if e.selected(scope):
                    self._take(e)
        else:
            for e in _reg.global_entries:
                if e.selected(scope):
                    self._take(e)

    def _take(self, e: _Entry) -> None:
        cb = e.cb
        if cb.needs_inputs:
            self._needs_inputs = True
        if cb.needs_outputs:
            self._needs_outputs = True
        if cb.needs_ids:
            self._needs_ids = True
        if self._e0 is None:
            self._e0 = e
            self._state = 0
        else:
            extra = self._extra_fields()
            more = extra.more
            if more is None:
                extra.more = [e, None]
            else:
                more.append(e)
                more.append(None)

    def _extra_fields(self) -> _RangeExtra:
        extra = self._extra
        if extra is None:
            extra = _RangeExtra()
            self._extra = extra
        return extra

    def _more_callbacks(self) -> Optional[list[object]]:
        """The callbacks after the first, each followed by its context (or None)."""
        extra = self._extra
        if extra is None:
            return None
        return extra.more

    def _entry(self) -> object:
        """What the stack or a link holds for this range: itself, or for a range started with
        ``before()`` a weak reference to its _Abandon."""
        extra = self._extra
        if extra is not None:
            holder = extra.abandon
            if holder is not None:
                return holder.ref
        return self

    def before(
        self,
        name: object,
        args: object = None,
        kwargs: object = None,
        sequence_nr: object = -1,
    ) -> None:
        """Start the range: name it, record inputs if asked, run start callbacks, make it current."""
        if not isinstance(name, str):
            raise RecfnTypeError(f"RecordFunction name must be a str, got {type(name).__name__}")
        if self._state > 0:
            raise RecfnStateError(f"RecordFunction {self.name!r} was already started")
        if isinstance(sequence_nr, bool) or not isinstance(sequence_nr, int):
            raise RecfnTypeError(f"sequence_nr must be an int, got {type(sequence_nr).__name__}")
        self.name = name
        self.seq_nr = sequence_nr
        if self._state < 0:
            return
        self._extra_fields().abandon = _Abandon(self)
        self._begin(args, kwargs)

    def _enter_context(self, td: _ThreadData, loop: i64) -> None:
        """Make this range the innermost of its task (``loop`` 1: an event loop runs on the
        thread; 2: and td's claimed stack is private to the running context) or of its thread,
        and link it to the range it opened under."""
        self._td = td
        entry = self._entry()
        if loop != 0:
            # Inside an event loop, nesting is per task: the ContextVar gives each task its own.
            claimed = td.claimed
            task = claimed if loop == 2 and claimed is not None else _task_stack(td)
            top = task.top
            parent = None
            while top > 0:  # slots of ranges that ended since are dropped here
                parent = _task_range(task, top - 1)
                if parent is not None:
                    break
                task.entries[top - 1] = None
                top -= 1
            if parent is None and td.top > 0:
                parent = _stack_top(td)  # a range open outside the loop
            # Each list grows on its own: an interrupt between the two appends leaves them of
            # different lengths, and the next range writes its slot in both all the same.
            if top < len(task.entries):
                task.entries[top] = entry
            else:
                task.entries.append(entry)
            if top < len(task.runs):
                task.runs[top] = self._run + 1
            else:
                task.runs.append(self._run + 1)
            task.top = top + 1
            self._task = task
        else:
            # Elsewhere a per-thread stack is exact and avoids ContextVar writes.
            stack = td.stack
            top = td.top
            parent = None
            if top > 0:
                below = stack[top - 1]
                if isinstance(below, RecordFunction):
                    parent = below
                else:
                    parent = _stack_top(td)
                    top = td.top
            if top < len(stack):
                stack[top] = entry
            else:
                stack.append(entry)
            self._on_stack = True  # before the top moves: a leave finds it wherever it stops
            td.top = top + 1
        self._run += 1
        if parent is not None and parent._td is td:
            self._parent = parent
            self._parent_run = parent._run
            self.depth = parent.depth + 1

    def _begin(self, inputs: object, kwinputs: object) -> None:
        td = _thread_data()
        called: i64 = 0  # callbacks whose start was called: their end must run too
        extra: Optional[_RangeExtra] = None  # holds the inputs during the start
        try:  # an interrupted start takes the range off its stack again (`_fast_begin`)
            self._enter_context(td, 1 if _asyncio_loop_running() else 0)
            if self._needs_ids:
                td.next_seq += 1
                self.handle = (td.tid << TID_SHIFT) | td.next_seq
            self._state = 1
            if self._needs_inputs:
                extra = self._extra_fields()
                extra.inputs = inputs
                extra.kwinputs = kwinputs
            self._in_start = True
            e0 = self._e0
            if e0 is not None:
                called = 1
                try:
                    self._c0 = e0.cb.on_start(self)
                except Exception:
                    e0.report_failure("start")
            more = self._more_callbacks()
            if more is not None:
                for i in range(0, len(more), 2):
                    e = more[i]
                    assert isinstance(e, _Entry)
                    called += 1
                    try:
                        more[i + 1] = e.cb.on_start(self)
                    except Exception:
                        e.report_failure("start")
        except BaseException:
            # KeyboardInterrupt, SystemExit...: the caller never gets the range, so end it here.
            self._in_start = False
            self._state = 2
            self._leave_context(False, False)
            self._end_started(called)
            self._c0 = None
            self._forget_run()
            raise
        self._in_start = False
        if extra is not None:
            extra.inputs = None
            extra.kwinputs = None

    def _fast_begin(self, plain: _Entry) -> bool:
        """Start this range as ``_select`` + ``_begin`` + the profiler's ``on_start`` would for
        the one plain profiler, natively; False (nothing changed) when the slow path must run:
        an unknown thread, a thread-local state that is off or has callbacks, or a thread whose
        rows are not this profiler's yet. Inside an event loop (a Jupyter cell, an asyncio
        task) the range nests in its task's links, as ``_begin`` nests it."""
        if self.seq_nr >= 0 or self.forward_thread_id != 0:
            return False  # the profiler's on_start records those
        got = _fast_thread()
        if got is None:
            return False
        td = cast(_ThreadData, got)
        cb = plain.cb
        if td.rows_owner is not cb:
            return False
        if _reg.state_touched and not _state_get().enabled:
            return False  # a state with callbacks would have cleared _reg.plain
        self._e0 = plain
        rows = td.rows
        # Whatever interrupts the start (a KeyboardInterrupt between two statements of the
        # interpreted build) takes the range off its thread's stack again, or every later
        # range of the thread would nest under it.
        try:
            self._enter_context(td, td.row_args[ROW_ARGS_LOOP])
            parent = self._parent
            td.next_seq += 1
            self.handle = (td.tid << TID_SHIFT) | td.next_seq
            self._state = 1
            self._fast = True
            # The row's numbers go through td.row_args and the row is found again by this
            # range (its key): nothing is boxed.
            args = td.row_args
            args[0] = td.next_seq
            parent_handle: i64 = 0  # typed: a conditional expression would box the handle
            if parent is not None and parent.sink_chunk is rows:  # a row of this capture
                parent_handle = parent.handle
            args[1] = parent_handle
            args[2] = i64(self._scope | (self.depth << META_DEPTH_SHIFT))
            try:
                if _open_row(rows, self, self.name):
                    self.sink_chunk = rows
                    self.sink_row = 0  # admitted (sink_row < 0: not recorded)
                    hook = td.rows_stack
                    if hook is not None:
                        hook()
            except Exception:
                plain.report_failure("start")  # as _begin does when on_start raises
        except BaseException:
            self._state = 2  # the caller never gets the range: end it here, as _begin does
            self._leave_context(False, False)
            if self.sink_row >= 0:
                _close_row(rows, self, 0)
            raise
        return True

    def _end_here(self) -> None:
        """End the range where it started (a with-block's exit, a wrapped call's return).
        Whatever interrupts the end (a KeyboardInterrupt between two statements of the
        interpreted build) still takes the range off its stack, or every later range of the
        thread would nest under it; its row, not ended, is written as still open."""
        try:
            if self._fast:
                self._fast_end()
            else:
                self._finish(False, False)
        except BaseException:
            self._leave_context(False, False)
            if self._state == 1:
                self._state = 2  # ended as far as it goes: not again when collected
            raise

    def _fast_end(self) -> None:
        """End a range ``_fast_begin`` started: pop it from its thread's or its task's stack
        (or leave its slot when it ends out of order) and end its row; one left from another
        thread or task is async, and the profiler's ``on_end`` marks it so through
        ``_finish``."""
        td = self._td
        if td is not None and self._on_stack and td.top > 0 and td.stack[td.top - 1] is self:
            td.top -= 1
            td.stack[td.top] = None
            self._on_stack = False
        elif self._task is not None and self._pop_own_task():
            pass
        else:
            self._leave_context(False, False)
            if self.is_async:
                self._finish(False, False)
                return
        self._state = 2
        if self.sink_row >= 0:
            _close_row(self.sink_chunk, self, 0)

    def _pop_own_task(self) -> bool:
        """Pop this range from its task's stack if it is the innermost there and the running
        context is that stack's, unseen by others (the common end inside a loop); False when
        ``_leave_context`` must decide."""
        task = self._task
        if (
            task is None
            or task.top == 0
            or task.entries[task.top - 1] is not self
            or _private_value is None
            or _private_value(_current_var) is not task
        ):
            return False
        self._task = None
        task.entries[task.top - 1] = None
        _task_drop_ended(task)
        return True

    def end(self) -> None:
        """End the range: run end callbacks and restore the parent as the current range."""
        if self._state != 1:
            if self._state == 2:
                raise RecfnStateError(f"RecordFunction {self.name!r} was already ended")
            self._state = 2
            return
        self._finish(True, False)

    def _finish(self, any_thread: bool, collected: bool) -> None:
        """End callbacks; ``any_thread`` when the caller may be on another thread than the start
        (``end()``, futures), not for with-blocks and wrappers, which exit where they entered;
        ``collected`` when the range is being garbage-collected without ``end()``.

        Every end callback runs even if one raises a BaseException, which is re-raised after.
        """
        self._state = 2
        self._leave_context(any_thread, collected)
        pending: Optional[BaseException] = None
        e0 = self._e0
        if e0 is not None:
            try:
                e0.cb.on_end(self, self._c0)
            except Exception:
                e0.report_failure("end")
            except BaseException as exc:
                pending = exc
        more = self._more_callbacks()
        if more is not None:
            for i in range(0, len(more), 2):
                e = more[i]
                assert isinstance(e, _Entry)
                try:
                    e.cb.on_end(self, more[i + 1])
                except Exception:
                    e.report_failure("end")
                except BaseException as exc:
                    if pending is None:
                        pending = exc
        self._c0 = None
        self._forget_run()
        if pending is not None:
            raise pending

    def _forget_run(self) -> None:
        """Drop what one run of the range held for its callbacks (an ended range keeps no
        inputs, outputs or contexts; dropping the _Abandon ends its cycle)."""
        extra = self._extra
        if extra is not None:
            extra.inputs = None
            extra.kwinputs = None
            extra.outputs = None
            extra.more = None
            extra.abandon = None

    def _end_started(self, called: i64) -> None:
        """After a start callback raised a BaseException: end the ``called`` first callbacks
        (that exception is the one that propagates: any raised here is dropped)."""
        e0 = self._e0
        if e0 is not None and called > 0:
            try:
                e0.cb.on_end(self, self._c0)
            except Exception:
                e0.report_failure("end")
            except BaseException:  # the start callback's exception is already propagating
                pass
        more = self._more_callbacks()
        if more is not None:
            for i in range(0, min(len(more), 2 * (called - 1)), 2):
                e = more[i]
                assert isinstance(e, _Entry)
                try:
                    e.cb.on_end(self, more[i + 1])
                except Exception:
                    e.report_failure("end")
                except BaseException:
                    pass

    def _leave_context(self, any_thread: bool, collected: bool) -> None:
        """Take this range off its thread's stack or close its link; a range left from another
        thread or task is async (one left out of order where it started is not)."""
        td = self._td
        if self._on_stack:
            # The flag goes once the slot is gone: a leave that an interrupt cuts short
            # (the interpreted build) is done again whole.
            if td is None:
                self._on_stack = False
                return
            entry = self._entry()
            stack = td.stack
            top = td.top
            if top > 0 and stack[top - 1] is entry and (not any_thread or _thread_data() is td):
                stack[top - 1] = None
                td.top = top - 1  # slots of ranges that ended out of order are dropped later
                self._on_stack = False
                return
            if _thread_data() is not td:
                self.is_async = True
            for i in range(min(top, len(stack))):
                if stack[i] is entry:
                    stack[i] = None  # its thread drops the slot when it reaches it
                    break
            self._on_stack = False
            return
        task = self._task
        if task is None:
            return
        self._task = None
        if collected:
            if _thread_data() is not td:
                self.is_async = True
            return  # its entry is a dead weak reference: skipped by whoever reads it next
        if _private_value is not None and _private_value(_current_var) is task:
            _task_leave(task, self._entry(), self._run)  # its own task's, unseen by others
            return
        if _current_context is None:
            self._leave_by_reset(task)
            return
        if task.context is not _current_context():  # another thread or asyncio task's
            self.is_async = True
            return  # its entry is skipped once the range has ended
        current = _current_get()  # the task's stack, or a copy of it made current since
        if current is not None:
            _task_leave(current, self._entry(), self._run)

    def _leave_by_reset(self, task: _TaskStack) -> None:
        """The pure build's end of a range in an event loop: every range made a stack current
        with its ContextVar.set; resetting it tells another context's end (ValueError)."""
        token = task.token
        task.token = None
        if token is None:
            return
        innermost = _current_get()
        try:
            _current_reset(cast(contextvars.Token[Optional[_TaskStack]], token))
        except ValueError:  # another thread or asyncio task than the one it started in
            self.is_async = True
            return
        if innermost is not task:  # ended out of order: the inner range stays current
            _current_set(innermost)

    def _detach(self) -> None:
        """Leave the current context without ending (the range now ends with a future)."""
        self._leave_context(False, False)
        self.is_async = True
        e0 = self._e0
        if e0 is not None:
            try:
                self._c0 = e0.cb.on_detach(self, self._c0)
            except Exception:
                e0.report_failure("detach")
        more = self._more_callbacks()
        if more is not None:
            for i in range(0, len(more), 2):
                e = more[i]
                assert isinstance(e, _Entry)
                try:
                    more[i + 1] = e.cb.on_detach(self, more[i + 1])
                except Exception:
                    e.report_failure("detach")

    # -- properties -------------------------------------------------------------------------

    @property
    def scope(self) -> RecordScope:
        """The range's RecordScope."""
        return _SCOPES[self._scope]

    @property
    def is_active(self) -> bool:
        """Whether any callback was selected for this range."""
        return self._state >= 0 and self._e0 is not None

    @property
    def needs_inputs(self) -> bool:
        return self._needs_inputs

    @property
    def needs_outputs(self) -> bool:
        return self._needs_outputs

    @property
    def thread_id(self) -> int:
        """Logical id of the thread the range started on (0 if it never started)."""
        td = self._td
        return td.tid if td is not None else 0

    @property
    def parent_handle(self) -> int:
        """Handle of the enclosing range (0 for a root, or once that object was reused)."""
        parent = self.parent
        return parent.handle if parent is not None else 0

    @property
    def parent(self) -> Optional[RecordFunction]:
        """The enclosing range, while its object has not been started again: each parent
        started before its child, so following ``parent`` always ends."""
        parent = self._parent
        if parent is None or parent._run != self._parent_run:
            return None
        return parent

    @property
    def args(self) -> object:
        """The ``args`` string of ``record_function`` (or ``None``)."""
        return self._args

    @property
    def inputs(self) -> object:
        """Positional inputs; only readable while start callbacks run."""
        self._check_in_start("inputs")
        extra = self._extra
        return extra.inputs if extra is not None else None

    @property
    def kwinputs(self) -> object:
        """Keyword inputs; only readable while start callbacks run."""
        self._check_in_start("kwinputs")
        extra = self._extra
        return extra.kwinputs if extra is not None else None

    def _check_in_start(self, what: str) -> None:
        if not self._in_start:
            raise RecfnStateError(
                f"RecordFunction.{what} is only available inside start callbacks "
                "(and only when a callback was registered with needs_inputs=True)"
            )

    @property
    def outputs(self) -> object:
        """Outputs set with ``set_outputs`` (readable by end callbacks)."""
        extra = self._extra
        return extra.outputs if extra is not None else None

    def set_outputs(self, outputs: object) -> None:
        """Hand outputs to end callbacks; kept only when some callback needs outputs."""
        if self._needs_outputs:
            self._extra_fields().outputs = outputs

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        # Defined here so subclasses share one object layout (mypyc adds a vectorcall slot).
        raise RecfnTypeError("a RecordFunction is not a decorator; use recfn.record_function(name)")

    def __repr__(self) -> str:
        states = {-1: "inactive", 0: "selected", 1: "started", 2: "ended"}
        return f"<RecordFunction {self.name!r} {_SCOPES[self._scope].name} {states[self._state]}>"


@mypyc_attr(free_list_len=1)  # a range made and dropped per with-block reuses one object
class record_function(RecordFunction):
    """A USER_SCOPE range, as a context manager or a decorator of plain and async functions.

    ``with record_function("step"):`` costs one global test when nothing listens. Exceptions
    inside end the range and propagate unchanged. ``args`` is a string handed to callbacks
    needing inputs and kept by the profiler.
    """

    def __init__(self, name: object, args: object = None) -> None:
        self._construct(name, args)

    def _construct(self, name: object, args: object = None) -> None:
        """``__init__``'s work; the compiled class's constructor calls it directly
        (``_ccall.install_constructor``: no argument tuple)."""
        if not isinstance(name, str):
            raise RecfnTypeError(f"record_function name must be a str, got {type(name).__name__}")
        if args is not None and not isinstance(args, str):
            raise RecfnTypeError(
                f"record_function args must be a str or None, got {type(args).__name__}"
            )
        self._scope = SCOPE_USER
        self.name = name
        self._args = args

    def __enter__(self) -> record_function:
        if _reg.n_callbacks != 0:
            if self._state != -1 or self._e0 is not None:
                self._recycle()
            plain = _reg.plain
            if plain is not None and self._args is None and self._fast_begin(plain):
                return self
            self._select()
            if self._state == 0:
                # record_function hands its args; record_function_fast its pending inputs.
                extra = self._extra
                if extra is None:
                    self._begin(self._args, None)
                else:
                    self._begin(
                        self._args if self._args is not None else extra.pending_inputs,
                        extra.pending_kwinputs,
                    )
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._state == 1:
            if self._future_end:
                self._detach()
            else:
                self._end_here()

    async def __aenter__(self) -> record_function:
        return self.__enter__()

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.__exit__(exc_type, exc, tb)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Decorate ``fn`` so each call is one range named like this one."""
        from recfn.engine._decorate import decorate

        args = self._args
        return decorate(
            fn,
            self.name,
            args if isinstance(args, str) else None,
            begin_range,
            end_range,
            _ccall.RangeCall if _ccall is not None else None,
        )

    def end_on_future(self, fut: Any) -> Any:
        """End this range when ``fut`` completes; return a future with the same outcome.

        Accepts a ``concurrent.futures.Future`` or an asyncio future/task. The with-block's exit
        no longer ends the range. Calling it twice raises ``RuntimeError``.
        """
        if self._future_end:
            raise RecfnStateError(f"end_on_future was already called for range {self.name!r}")
        if self._state == 2:
            raise RecfnStateError(f"range {self.name!r} has already ended")
        from recfn.engine._futures import chain_future

        self._future_end = True
        return chain_future(fut, self)

    def _recycle(self) -> None:
        """Make an ended range reusable (``r = record_function("x")`` entered in a loop)."""
        if self._state != 2:
            raise RecfnStateError(f"range {self.name!r} is already entered")
        self._state = -1
        self._e0 = None
        self._c0 = None
        self._forget_run()
        self._parent = None
        self._td = None
        self.depth = 0
        self.handle = 0
        self.is_async = False
        self._future_end = False
        self._needs_inputs = False
        self._needs_outputs = False
        self._needs_ids = False
        self.sink_chunk = None
        self.sink_row = -1
        self._fast = False

    def _end_from_future(self) -> None:
        if self._state == 1:
            self._finish(True, False)


@mypyc_attr(free_list_len=1)  # a range made and dropped per with-block reuses one object
class record_function_fast(record_function):
    """The seed's cheap range: does nothing unless a callback (e.g. a profiler) is active.

    ``input_values`` (list or tuple) and ``keyword_values`` (dict) go to callbacks needing inputs.
    """

    def __init__(
        self,
        name: object,
        input_values: object = None,
        keyword_values: object = None,
    ) -> None:
        self._construct_fast(name, input_values, keyword_values)

    def _construct_fast(
        self,
        name: object,
        input_values: object = None,
        keyword_values: object = None,
    ) -> None:
        """``__init__``'s work, called directly by the compiled class's constructor."""
        if not isinstance(name, str):
            raise RecfnTypeError(
                f"record_function_fast name must be a str, got {type(name).__name__}"
            )
        if input_values is not None and not isinstance(input_values, (list, tuple)):
            raise RecfnTypeError(
                "record_function_fast input_values must be a list or tuple, "
                f"got {type(input_values).__name__}"
            )
        if keyword_values is not None and not isinstance(keyword_values, dict):
            raise RecfnTypeError(
                "record_function_fast keyword_values must be a dict, "
                f"got {type(keyword_values).__name__}"
            )
        self._scope = SCOPE_USER
        self.name = name
        if input_values is not None or keyword_values is not None:
            extra = self._extra_fields()
            extra.pending_inputs = input_values
            extra.pending_kwinputs = keyword_values


def begin_range(name: str, args: Optional[str], scope: i32) -> Optional[RecordFunction]:
    """Start a range for wrappers (decorators, instrumentation); ``None`` when nothing listens."""
    if _reg.n_callbacks == 0:
        return None
    rf = _open_range(name, scope, args is None)
    if rf is not None and rf._state == 0:
        rf._args = args
        rf._begin(args, None)
    return rf


def begin_call(
    name: str, scope: i32, args: tuple[object, ...], kwargs: dict[str, object]
) -> Optional[RecordFunction]:
    """Like ``begin_range`` but hands the call's arguments to callbacks that need inputs."""
    if _reg.n_callbacks == 0:
        return None
    rf = _open_range(name, scope, True)
    if rf is not None and rf._state == 0:
        rf._begin(args, kwargs)
    return rf


def _open_range(name: str, scope: i32, may_be_fast: bool) -> Optional[RecordFunction]:
    """A wrapper's range: started on the fast path when the plain profiler is the only callback
    (it needs neither args nor inputs; ``may_be_fast`` when the range has no args), else with its
    callbacks selected (``_state`` 0, for the caller to start); None when none was selected."""
    plain = _reg.plain
    if plain is not None and may_be_fast:
        rf = RecordFunction(_UNSELECTED)  # no selection: the fast path needs none
        rf._scope = scope
        rf.name = name
        if rf._fast_begin(plain):
            return rf
        rf._select()
    else:
        rf = RecordFunction(scope)
        rf.name = name
    return rf if rf._state >= 0 else None


def end_range(rf: RecordFunction) -> None:
    """End a range started by ``begin_range``/``begin_call``."""
    if rf._state == 1:
        rf._end_here()


def current_range() -> Optional[RecordFunction]:
    """The innermost active range of this thread or asyncio task, or ``None``."""
    td = _thread_data()
    if _asyncio_loop_running():
        rf = _task_top(_current_get())
        if rf is not None and rf._td is td:
            return rf
    return _stack_top(td)


def _innermost(td: _ThreadData) -> Optional[RecordFunction]:
    """The innermost open range of the running task if any, else of the thread ``td``."""
    rf = _task_top(_current_get())
    if rf is None:
        rf = _stack_top(td)
    return rf


def _task_stack(td: _ThreadData) -> _TaskStack:
    """The running task's stack to push a range on (from the thread ``td``): the current one
    where no other context can see it, else a copy of its open ranges, made current (one
    ContextVar write) and claimed."""
    if _private_value is not None:
        found = _private_value(_current_var)
        if found is not None:
            return cast(_TaskStack, found)
    current = _current_get()
    entries: list[object] = []
    runs: list[int] = []
    if current is not None:
        for i in range(current.top):
            if _task_range(current, i) is not None:
                entries.append(current.entries[i])
                runs.append(current.runs[i])
    task = _TaskStack(entries, runs)
    token = _current_set(task)
    if _claim is not None and _current_context is not None:
        _claim(_current_var)
        task.context = _current_context()
        td.claimed = task
    else:
        task.token = token
    return task


def _task_range(task: _TaskStack, i: i64) -> Optional[RecordFunction]:
    """The range at slot ``i`` of ``task`` if it is still open in the run it was pushed in."""
    entry = task.entries[i]
    run = task.runs[i]
    if entry is None:
        return None
    if isinstance(entry, RecordFunction):
        rf: Optional[RecordFunction] = entry
    else:
        rf = _live(entry)
    if rf is None or rf._state != 1 or rf._run != run:
        return None
    return rf


def _task_top(task: Optional[_TaskStack]) -> Optional[RecordFunction]:
    """The innermost open range of ``task`` (at most its depth in steps)."""
    if task is None:
        return None
    top = task.top
    while top > 0:
        rf = _task_range(task, top - 1)
        if rf is not None:
            return rf
        top -= 1
    return None


def _task_leave(task: _TaskStack, entry: object, run: i64) -> None:
    """Take the range ``entry`` (in its run ``run``) off ``task``: pop it when it is innermost,
    with the slots of ranges that ended under it; otherwise its slot is skipped from now on."""
    for i in range(task.top - 1, -1, -1):
        if task.entries[i] is entry and task.runs[i] == run:
            task.entries[i] = None
            if i == task.top - 1:
                _task_drop_ended(task)
            return


def _task_drop_ended(task: _TaskStack) -> None:
    """Lower ``task.top`` past the cleared slots at its top (ranges that ended out of order)."""
    top = task.top
    while top > 0 and task.entries[top - 1] is None:
        top -= 1
    task.top = top


def _stack_top(td: _ThreadData) -> Optional[RecordFunction]:
    """The innermost open range on ``td``'s stack (call on that thread): drops the slots of
    ranges that ended out of order or were collected."""
    stack = td.stack
    top = min(td.top, len(stack))
    while top > 0:
        entry = stack[top - 1]
        if isinstance(entry, RecordFunction):
            td.top = top
            return entry
        if entry is not None:
            rf = _live(entry)
            if rf is not None:
                td.top = top
                return rf
            stack[top - 1] = None
        top -= 1
    td.top = 0
    return None


def _live(weak: object) -> Optional[RecordFunction]:
    """The range behind a weak reference to its _Abandon, or ``None`` once it is collected."""
    assert isinstance(weak, weakref.ref)
    holder = weak()
    if holder is None:
        return None
    rf = holder.rf
    assert isinstance(rf, RecordFunction)
    return rf if rf._state == 1 else None


def _asyncio_loop_running() -> bool:
    """Whether an asyncio event loop runs on this thread (without importing asyncio)."""
    if _crange is not None:
        return _native_in_loop()
    probe = _reg.loop_probe
    if probe is None:
        events = _modules.get("asyncio.events")
        if events is None:
            return False  # asyncio was never imported: no loop can be running
        probe = events._get_running_loop
        _reg.loop_probe = probe
    return probe() is not None


def _install_call_protocol() -> bool:
    """Give the compiled range classes direct constructors and ``__enter__``/``__exit__`` bound
    from a free list (``recfn.native._ccall``), and report to ``recfn.native`` whether that took;
    False where the classes are interpreted or the glue is not built."""
    if _ccall is None:
        native.report_glue("call protocol", "recfn.native._ccall is not built (a pure build)")
        return False
    done = [
        _ccall.install_constructor(record_function, "_construct", 1, 2),
        _ccall.install_constructor(record_function_fast, "_construct_fast", 1, 3),
        _ccall.install_bound_free_list(record_function, "__enter__"),
        _ccall.install_bound_free_list(record_function, "__exit__"),
    ]
    installed = all(done)
    why_not: Optional[str] = None
    if not installed:
        compiled = not str(getattr(sys.modules.get(__name__), "__file__", "")).endswith(".py")
        why_not = (
            f"recfn.native._ccall (built with mypyc {native.mypyc_version()}) found no mypyc class "
            "layout it knows in the range classes"
            if compiled
            else "the range classes are interpreted (recfn.engine.ranges is not compiled) while "
            "recfn.native._ccall is built: a stale build?"
        )
    native.report_glue("call protocol", why_not)
    return installed


NATIVE_CALLS: Final = _install_call_protocol()
