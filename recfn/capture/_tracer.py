"""trace_calls: one FUNCTION-scope range per Python call, written straight into the profiler's buffers.

Compiled with mypyc. Where ``recfn.native._ctrace`` is built (compiled installs), a C profile hook
records the calls into per-thread C buffers instead, asking this module only to name a code
object once and for the engine's innermost range when a recorded range started or ended;
``merge_native_rows`` then interleaves those rows with the recorder's when tracing stops, with
the parents and depths described below. The Python tracer here is the fallback (pure installs,
NVTX forwarding, streaming, ``RECFN_CTRACE=0``).

Python tracer: each traced thread has a ``_ThreadTracer``: on 3.10-3.11 it is that thread's
``sys.setprofile`` callable (threads started while profiling install theirs on their first event,
through ``threading.setprofile``); on 3.12+ the ``sys.monitoring`` callbacks (process-wide, so
every thread is traced) find it by thread ident. A call appends one row to the thread's
recorder buffer and pushes the frame on a small stack of parallel vecs; the matching return
writes the end time. No RecordFunction object, no callback dispatch, no change to the engine's
current range per call: only the profiler sees traced calls.

Nesting: a traced call's parent is the innermost of the tracer's stack top and the current user
range (the engine's: the task's inside an event loop, else the thread's); handles grow
monotonically per thread, so "innermost" is "largest handle". User ranges,
marks and memory events do not know about traced calls when they start, so ``fix_nesting``
re-parents them when the profiler stops: walking a thread's rows in start order, the traced calls
open at a row's start form a stack (a traced call encloses the rows appended before it
returned), and the row's parent becomes that stack's top when it is more inner than the parent
the engine gave it. Depths are recomputed along the way. The C hook's rows are numbered from
``NATIVE_SEQ`` on their thread (apart from the engine's handles), so the merge compares rows by
their merged position, which is start order, where the Python tracer compares handles.
"""

from __future__ import annotations

import _thread
import fnmatch
import logging
import os
import struct
import sys
import threading
import time
import types
from typing import Any, Final, Optional

from librt.vecs import append, vec
from mypy_extensions import i32, i64

from recfn import native
from recfn.capture._recorder import (
    DEPTH_SHIFT,
    LOW32,
    LOW_META,
    Recorder,
    _Chunk,
    _ThreadBuffer,
    low32,
)
from recfn.engine.ranges import TID_SHIFT, _current_var, _innermost, _thread_data, _ThreadData
from recfn.engine.scope import SCOPE_FUNCTION
from recfn.errors import RecfnStateError, RecfnTypeError, RecfnValueError
from recfn.native.constants import CHUNK_ROWS, ESCAPED, NAME_EXCLUDED, NAME_NOT_NOW

TRACED_BIT: Final[i32] = LOW_META + 1  # marks traced rows until fix_nesting clears it
TRACED_META: Final[i32] = SCOPE_FUNCTION | TRACED_BIT
NOT_ENDED: Final[i64] = 1 << 62
NO_LIMIT: Final[i64] = 1 << 62
ALWAYS_EXCLUDED: Final = ("recfn", "recfn.*", "mypy_extensions")  # recfn, and its pure-mode helpers
USES_MONITORING: Final = sys.version_info >= (3, 12)

NATIVE_SEQ: Final[i64] = 1 << 31  # the C hook's rows are numbered from here on each thread
NATIVE_ROW: Final = (
    "=qqqii"  # recfn.native._ctrace's rows: start, end, user handle, name id, parent
)
# The C hook reads the TSC where the kernel's clock is the TSC (not Final: tests turn it off to
# run the hook on clock_gettime)
NATIVE_TSC = True

_log: Final = logging.getLogger("recfn")
_clock: Final = time.perf_counter_ns
_get_ident: Final = _thread.get_ident
# threading's registries (the same dict objects for the life of the process): a Thread waits
# in _limbo from start() until its new OS thread has put it in _active.
_ACTIVE_THREADS: Final[dict[int, object]] = threading._active  # type: ignore[attr-defined]
_STARTING_THREADS: Final[dict[object, object]] = threading._limbo  # type: ignore[attr-defined]


def _native_module() -> Any:
    """recfn.native._ctrace, the C profile hook (built with the compiled modules), or None (also when
    its rows are not the layout ``NATIVE_ROW`` reads)."""
    module = native.extension("_ctrace")
    if module is None:
        return None
    return module if struct.calcsize(NATIVE_ROW) == module.ROW_BYTES else None


_NATIVE: Final[Any] = _native_module()


def native_available() -> bool:
    """Whether trace_calls runs on the C hook (RECFN_CTRACE=0 asks for the Python tracer)."""
    return _NATIVE is not None and os.environ.get("RECFN_CTRACE", "1") != "0"


def check_options(
    trace_calls: object,
    trace_c_calls: object,
    include: object,
    exclude: object,
    max_depth: object,
    record_scopes: object,
) -> tuple[Optional[tuple[str, ...]], Optional[tuple[str, ...]]]:
    """Validate the ``trace_*`` profiler options; returns include/exclude as tuples."""
    for field, value in (("trace_calls", trace_calls), ("trace_c_calls", trace_c_calls)):
        if not isinstance(value, bool):
            raise RecfnTypeError(f"ProfilerConfig.{field} must be a bool, got {value!r}")
    if max_depth is not None:
        if isinstance(max_depth, bool) or not isinstance(max_depth, int):
            raise RecfnTypeError(
                f"ProfilerConfig.trace_max_depth must be an int or None, got {max_depth!r}"
            )
        if max_depth < 1:
            raise RecfnValueError(
                f"ProfilerConfig.trace_max_depth must be at least 1, got {max_depth}"
            )
    if trace_c_calls and not trace_calls:
        raise RecfnValueError("ProfilerConfig.trace_c_calls needs trace_calls=True")
    if (
        trace_calls
        and isinstance(record_scopes, tuple)
        and 0 not in [int(s) for s in record_scopes]
    ):
        raise RecfnValueError(
            "trace_calls records FUNCTION-scope ranges, but record_scopes leaves FUNCTION out"
        )
    return _pattern_tuple(include, "trace_include"), _pattern_tuple(exclude, "trace_exclude")


def _pattern_tuple(value: object, field: str) -> Optional[tuple[str, ...]]:
    if value is None:
        return None
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise RecfnTypeError(
            f"ProfilerConfig.{field} must be a pattern or a collection of patterns, got {value!r}"
        )
    out: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item:
            raise RecfnTypeError(
                f"ProfilerConfig.{field} holds fnmatch patterns (non-empty str), got {item!r}"
            )
        out.append(item)
    return tuple(out)


class Tracer:
    """Trace every call of the profiled threads into ``recorder`` until ``stop()``.

    Calls are named ``module::qualname``. ``include``/``exclude`` are fnmatch patterns matched
    against the module name alone, against ``module.qualname`` and against the recorded name
    ``module::qualname``; ``max_depth`` bounds how many traced calls nest.
    """

    recorder: Recorder
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    max_depth: i64
    c_calls: bool
    names: dict[int, i32]  # id(code or C function) -> name id, or NAME_EXCLUDED
    method_names: dict[tuple[type, str], i32]  # bound C methods, by (type of self, name)
    keep: list[object]  # what `names` holds ids of, kept alive so ids stay unique
    threads: list[_ThreadTracer]
    local: threading.local
    last_thread: Optional[_ThreadTracer]  # the last thread seen by a sys.monitoring callback
    prev_thread_hook: object
    disable: object  # sys.monitoring.DISABLE on 3.12+
    started: bool
    errors: i64
    nvtx: Any  # an NvtxForwarder (recfn.gpu._nvtx) to push/pop traced calls to, set before start()
    native: Any  # the recfn.native._ctrace.CTracer while the C hook traces
    _lock: threading.Lock

    def __init__(
        self,
        recorder: Recorder,
        include: Optional[tuple[str, ...]],
        exclude: Optional[tuple[str, ...]],
        max_depth: Optional[int],
        c_calls: bool,
    ) -> None:
        self.recorder = recorder
        self.include = include or ()
        self.exclude = exclude or ()
        self.max_depth = NO_LIMIT if max_depth is None else max_depth
        self.c_calls = c_calls
        self.names = {}
        self.method_names = {}
        self.keep = []
        self.threads = []
        self.local = threading.local()
        self.last_thread = None
        self.prev_thread_hook = None
        self.disable = None
        self.started = False
        self.errors = 0
        self.nvtx = None
        self.native = None
        self._lock = threading.Lock()
        self._check_free()

    def _check_free(self) -> None:
        """Refuse before anything starts when another tool holds what tracing needs."""
        if sys.version_info >= (3, 12):
            mon: Any = sys.monitoring
            holder = mon.get_tool(mon.PROFILER_ID)
            if holder is not None:
                raise RecfnStateError(
                    f"trace_calls needs sys.monitoring tool id {mon.PROFILER_ID}, which {holder!r} "
                    "holds; stop that profiler first"
                )
        elif sys.getprofile() is not None:
            raise RecfnStateError(
                "trace_calls uses sys.setprofile, but another profiler is installed in this "
                f"thread ({sys.getprofile()!r}); stop it first"
            )

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if (
            native_available()
            and self.nvtx is None  # NVTX ranges are pushed per call: the Python tracer does that
            and self.recorder.spill is None  # streaming moves rows out while tracing
        ):
            self._start_native()
        elif USES_MONITORING:
            self._start_monitoring()
        else:
            self.prev_thread_hook = threading.getprofile()
            threading.setprofile(self.thread_hook)
            sys.setprofile(self.attach())
        self.started = True

    def stop(self) -> None:
        """Stop tracing (the recorder must be stopped already) and fix nesting in the buffers."""
        if not self.started:
            return
        self.started = False
        native = self.native
        if native is not None:
            native.stop()  # other threads drop the hook at their next event
        if USES_MONITORING:
            self._stop_monitoring()
        else:
            hook_type: Any = _ThreadTracer if native is None else _NATIVE.ThreadState
            if isinstance(sys.getprofile(), hook_type):
                sys.setprofile(None)
            threading.setprofile(self.prev_thread_hook)  # type: ignore[arg-type]
        if native is not None:
            self._merge_native(native)
            return
        # Other threads drop their profile function at their next event (recorder.stopped).
        with self._lock:
            threads = list(self.threads)
        for tt in threads:
            tt.fix_nesting()
            tt.release()

    def attach(self) -> _ThreadTracer:
        """The calling thread's tracer, created on first use."""
        tt: Optional[_ThreadTracer] = getattr(self.local, "tracer", None)
        if tt is None:
            tt = _ThreadTracer(self, _thread_data())
            self.local.tracer = tt
            with self._lock:
                self.threads.append(tt)
        return tt

    def thread_hook(self, frame: types.FrameType, event: str, arg: object) -> None:
        """First profile event of a thread started while profiling: install its own tracer."""
        if self.recorder.stopped:
            sys.setprofile(None)
            return
        tt = self.attach()
        sys.setprofile(tt)
        tt(frame, event, arg)

    def report(self, exc: object = None) -> None:
        """A tracer error (``exc`` from the C hook): logged once, never raised into the program."""
        self.errors += 1
        if self.errors == 1:
            _log.warning(
                "recfn trace_calls failed on an event; tracing goes on",
                exc_info=exc if isinstance(exc, BaseException) else True,
            )

    # -- the C hook (recfn.native._ctrace) -----------------------------------------------------------

    def _start_native(self) -> None:
        recorder = self.recorder
        disable: object = None
        if sys.version_info >= (3, 12):
            mon: Any = sys.monitoring
            disable = mon.DISABLE
        native = _NATIVE.CTracer(
            self,
            recorder.gate,
            _current_var,
            recorder.max_events,
            self.max_depth,
            recorder.clock_offset,
            self.c_calls,
            disable,
            NATIVE_TSC,
        )
        self.native = native
        if USES_MONITORING:
            self._start_monitoring(native)  # the C callbacks: no frame object per call
            return
        self.prev_thread_hook = threading.getprofile()
        threading.setprofile(native.thread_hook)
        native.attach()

    def _merge_native(self, native: Any) -> None:
        """Move the stopped C hook's rows into the recorder's buffers."""
        merged: dict[int, i64] = {}  # rows merged per buffer so far, by id(buffer)
        for state in native.threads:
            info = state.info
            assert isinstance(info, _NativeThread)
            done = merged.get(id(info.buf), 0)
            merged[id(info.buf)] = done + merge_native_rows(info.buf, state.take(), done)
        self.native = None

    def thread_info(self) -> Optional[_NativeThread]:
        """For the C hook: the calling thread's engine data and recorder buffer; None while a
        ``threading.Thread`` is still starting (threading has not registered its name yet)."""
        if _STARTING_THREADS and _get_ident() not in _ACTIVE_THREADS:
            return None
        td = _thread_data()
        return _NativeThread(td, self.recorder._buffer(td))

    def innermost(self, info: _NativeThread) -> i64:
        """For the C hook: the handle of the engine's innermost open range on the thread, or 0."""
        td = info.td
        cur = _innermost(td)
        if cur is not None and cur._td is td and cur._state == 1:
            return cur.handle
        return 0

    # -- names --------------------------------------------------------------------------------

    def code_name(self, code: types.CodeType, frame: Optional[types.FrameType]) -> i32:
        """Name id for a Python function's code (NAME_EXCLUDED when filtered out), cached by identity."""
        key = id(code)
        nid = self.names.get(key)
        if nid is None:
            module = _module_of(code, frame)
            qualname = str(getattr(code, "co_qualname", code.co_name))
            nid = self.classify(module, qualname)
            if nid != NAME_NOT_NOW:
                self.names[key] = nid
                self.keep.append(code)
        return nid

    def c_name(self, fn: object) -> i32:
        """Name id for a C function or method; methods bound to an object or a type (made anew
        at each access) are cached by (that type, name)."""
        owner = getattr(fn, "__self__", None)
        if owner is None or isinstance(owner, types.ModuleType):
            key = id(fn)
            nid = self.names.get(key)
            if nid is None:
                nid = self.classify_c(fn, owner)
                if nid != NAME_NOT_NOW:
                    self.names[key] = nid
                    self.keep.append(fn)
            return nid
        mkey = (
            owner if isinstance(owner, type) else type(owner),
            str(getattr(fn, "__name__", "?")),
        )
        mid = self.method_names.get(mkey)
        if mid is None:
            mid = self.classify_c(fn, owner)
            if mid != NAME_NOT_NOW:
                self.method_names[mkey] = mid
        return mid

    def classify_c(self, fn: object, owner: object) -> i32:
        module = getattr(fn, "__module__", None)
        if module is None:
            objclass = getattr(fn, "__objclass__", None)
            source = (
                objclass
                if objclass is not None
                else owner
                if isinstance(owner, type)
                else type(owner)
            )
            module = getattr(source, "__module__", None)
        qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "?")
        return self.classify(str(module or "builtins"), str(qualname))

    def classify(self, module: str, qualname: str) -> i32:
        for pattern in ALWAYS_EXCLUDED:
            if fnmatch.fnmatchcase(module, pattern):
                return NAME_EXCLUDED
        full = f"{module}.{qualname}"
        name = f"{module}::{qualname}"
        if self.include and not _matches(self.include, module, full, name):
            return NAME_EXCLUDED
        if _matches(self.exclude, module, full, name):
            return NAME_EXCLUDED
        if self.recorder._lock.locked():
            # Taking it could deadlock: this event may come from inside the recorder (pure Python
            # mode). Skip the event; the next call of this function is named and recorded.
            return NAME_NOT_NOW
        return self.recorder._name_id(name)

    # -- sys.monitoring (3.12+) ---------------------------------------------------------------

    def _start_monitoring(self, native: Any = None) -> None:
        """Register the callbacks: this tracer's, or the C ones of ``native`` (same names)."""
        if sys.version_info >= (3, 12):
            mon: Any = sys.monitoring  # mypyc would look it up as module sys._monitoring
            tool = mon.PROFILER_ID
            mon.use_tool_id(tool, "recfn")  # free: checked in __init__
            self.disable = mon.DISABLE
            cb: Any = self if native is None else native
            ev = mon.events
            mon.register_callback(tool, ev.PY_START, cb.on_py_start)
            mon.register_callback(tool, ev.PY_RESUME, cb.on_py_start)
            mon.register_callback(tool, ev.PY_THROW, cb.on_py_throw)
            mon.register_callback(tool, ev.PY_RETURN, cb.on_py_exit)
            mon.register_callback(tool, ev.PY_YIELD, cb.on_py_exit)
            mon.register_callback(tool, ev.PY_UNWIND, cb.on_py_unwind)
            events = (
                ev.PY_START | ev.PY_RESUME | ev.PY_THROW | ev.PY_RETURN | ev.PY_YIELD | ev.PY_UNWIND
            )
            if self.c_calls:
                mon.register_callback(tool, ev.CALL, cb.on_call)
                mon.register_callback(tool, ev.C_RETURN, cb.on_c_exit)
                mon.register_callback(tool, ev.C_RAISE, cb.on_c_exit)
                events |= ev.CALL | ev.C_RETURN | ev.C_RAISE
            mon.restart_events()
            mon.set_events(tool, events)

    def _stop_monitoring(self) -> None:
        if sys.version_info >= (3, 12):
            mon: Any = sys.monitoring  # mypyc would look it up as module sys._monitoring
            tool = mon.PROFILER_ID
            mon.set_events(tool, 0)
            for event in (
                mon.events.PY_START,
                mon.events.PY_RESUME,
                mon.events.PY_THROW,
                mon.events.PY_RETURN,
                mon.events.PY_YIELD,
                mon.events.PY_UNWIND,
                mon.events.CALL,
                mon.events.C_RETURN,
                mon.events.C_RAISE,
            ):
                mon.register_callback(tool, event, None)
            mon.free_tool_id(tool)
            mon.restart_events()  # re-enable locations this run DISABLEd

    def _thread(self) -> Optional[_ThreadTracer]:
        """The calling thread's tracer: the last one seen when the thread is the same (cheap).
        None while a ``threading.Thread`` is still starting (sys.monitoring sees its bootstrap
        before threading has registered it, so its name would be a stand-in's)."""
        tt = self.last_thread
        ident = _get_ident()
        if tt is not None and tt.ident == ident:
            return tt
        if _STARTING_THREADS and ident not in _ACTIVE_THREADS:
            return None
        tt = self.attach()
        self.last_thread = tt
        return tt

    def on_py_start(self, code: types.CodeType, offset: int) -> object:
        if self.recorder.stopped:
            return None
        try:
            tt = self._thread()
            if tt is None:
                return None
            nid = tt.code_nid(code, None)
            if nid >= 0:
                tt.enter(code, nid)
            elif nid == NAME_EXCLUDED:
                return self.disable
        except Exception:
            self.report()
        return None

    def on_py_throw(self, code: types.CodeType, offset: int, exc: object) -> object:
        # PY_THROW is not a local event: returning DISABLE would raise ValueError in the
        # program, replacing the exception being thrown in.
        self.on_py_start(code, offset)
        return None

    def on_py_exit(self, code: types.CodeType, offset: int, value: object) -> object:
        if self._leave(code):
            return self.disable
        return None

    def on_py_unwind(self, code: types.CodeType, offset: int, exc: object) -> object:
        # PY_UNWIND cannot be disabled either (ValueError in the program, which would hide the
        # exception propagating through the frame).
        self._leave(code)
        return None

    def _leave(self, code: types.CodeType) -> bool:
        """Close ``code``'s traced call on this thread; True when ``code`` is excluded and its
        exit events may be disabled."""
        if self.recorder.stopped:
            return False
        try:
            tt = self._thread()
            if tt is None:
                return False
            return not tt.leave(code) and self.names.get(id(code)) == NAME_EXCLUDED
        except Exception:
            self.report()
        return False

    def on_call(self, code: types.CodeType, offset: int, fn: object, arg0: object) -> object:
        if self.recorder.stopped or isinstance(fn, (types.FunctionType, types.MethodType, type)):
            return None
        try:
            tt = self._thread()
            if tt is None:
                return None
            caller = tt.code_nid(code, None)  # only C calls made by traced code
            if caller < 0:
                return self.disable if caller == NAME_EXCLUDED else None
            nid = self.c_name(fn)
            if nid >= 0:
                tt.enter(fn, nid)
        except Exception:
            self.report()
        return None

    def on_c_exit(self, code: types.CodeType, offset: int, fn: object, arg0: object) -> object:
        if not self.recorder.stopped:
            try:
                tt = self._thread()
                if tt is not None:
                    tt.leave(fn)
            except Exception:
                self.report()
        return None


def _module_of(code: types.CodeType, frame: Optional[types.FrameType]) -> str:
    """The module a code object runs in: its frame's globals, else the nearest frame running it."""
    if frame is None:
        frame = sys._getframe(0)  # sys.monitoring gives no frame; the code runs a few frames up
        while frame is not None and frame.f_code is not code:
            frame = frame.f_back
    if frame is None:
        return "?"
    name = frame.f_globals.get("__name__")
    return name if isinstance(name, str) and name else "?"


def _matches(patterns: tuple[str, ...], module: str, full: str, name: str) -> bool:
    """Whether a pattern matches the module, ``module.qualname`` or the recorded name."""
    for pattern in patterns:
        if (
            fnmatch.fnmatchcase(full, pattern)
            or fnmatch.fnmatchcase(module, pattern)
            or fnmatch.fnmatchcase(name, pattern)
        ):
            return True
    return False


class _ThreadTracer:
    """One thread's traced-call stack and the rows it wrote (its ``sys.setprofile`` callable)."""

    owner: Tracer
    recorder: Recorder
    td: _ThreadData
    ident: i64  # threading.get_ident() of the thread
    buf: _ThreadBuffer
    max_depth: i64
    c_calls: bool
    nvtx: Any
    # the stack of open traced calls, as parallel arrays (sp entries in use)
    keys: list[object]  # the frame (3.11) / code (3.12) / C function of each open call
    chunks: list[_Chunk]
    ids: vec[i64]
    rows: vec[i64]
    starts: vec[i64]
    slots: vec[i64]
    sp: i64
    # every traced call of this thread, in start order, for fix_nesting
    traced_ends: vec[i64]  # the buffer's row count when it returned (NOT_ENDED while open)
    last_code: object
    last_nid: i32
    call_event: object  # the str objects CPython passes as "call" and "return" events
    return_event: object

    def __init__(self, owner: Tracer, td: _ThreadData) -> None:
        self.owner = owner
        self.recorder = owner.recorder
        self.td = td
        self.ident = _get_ident()  # attach() runs on the thread itself
        self.buf = owner.recorder._buffer(td)
        self.max_depth = owner.max_depth
        self.c_calls = owner.c_calls
        self.nvtx = owner.nvtx
        self.keys = []
        self.chunks = []
        self.ids = vec[i64]()
        self.rows = vec[i64]()
        self.starts = vec[i64]()
        self.slots = vec[i64]()
        self.sp = 0
        self.traced_ends = vec[i64]()
        self.last_code = None
        self.last_nid = NAME_EXCLUDED
        self.call_event = None
        self.return_event = None

    def __call__(self, frame: types.FrameType, event: str, arg: object) -> None:
        """``sys.setprofile`` events of this thread (3.10-3.11)."""
        if self.recorder.stopped:
            sys.setprofile(None)
            return
        try:
            # CPython passes the same event str objects every time: compare identities first.
            if event is self.call_event:
                nid = self.code_nid(frame.f_code, frame)
                if nid >= 0:
                    self.enter(frame, nid)
            elif event is self.return_event:
                self.leave(frame)
            elif event == "call" or event == "return":
                self.learn_event(frame, event)
            elif self.c_calls:
                if event == "c_call":
                    # only C calls made by traced code (never recfn's own, which may hold its locks)
                    if self.code_nid(frame.f_code, frame) >= 0:
                        nid = self.owner.c_name(arg)
                        if nid >= 0:
                            self.enter(arg, nid)
                else:  # c_return, c_exception
                    self.leave(arg)
        except Exception:
            self.owner.report()

    def learn_event(self, frame: types.FrameType, event: str) -> None:
        """First "call"/"return" event: remember the str object CPython uses, then handle it."""
        if event == "call":
            self.call_event = event
        else:
            self.return_event = event
        self(frame, event, None)

    def code_nid(self, code: types.CodeType, frame: Optional[types.FrameType]) -> i32:
        if code is self.last_code:
            return self.last_nid
        nid = self.owner.code_name(code, frame)
        if nid != NAME_NOT_NOW:
            self.last_code = code
            self.last_nid = nid
        return nid

    def enter(self, key: object, nid: i32) -> None:
        """A traced call starts: one row, pushed on the stack."""
        sp = self.sp
        if sp >= self.max_depth or not self.recorder._admit():
            return
        td = self.td
        td.next_seq += 1
        rid: i64 = (td.tid << TID_SHIFT) | td.next_seq
        parent: i64 = self.ids[sp - 1] if sp > 0 else 0
        cur = _innermost(td)
        buf = self.buf
        if (
            cur is not None
            and cur._td is td
            and cur.handle > parent
            and cur._state == 1
            and self.recorder.records(buf, cur)
        ):
            parent = cur.handle
        start = _clock() + self.recorder.clock_offset
        row = buf.add_row(rid, parent, start, nid, TRACED_META)
        slot: i64 = len(self.traced_ends)
        self.traced_ends = append(self.traced_ends, NOT_ENDED)
        if sp < len(self.keys):
            self.keys[sp] = key
            self.chunks[sp] = buf.cur
            self.ids[sp] = rid
            self.rows[sp] = row
            self.starts[sp] = start
            self.slots[sp] = slot
        else:
            self.keys.append(key)
            self.chunks.append(buf.cur)
            self.ids = append(self.ids, rid)
            self.rows = append(self.rows, row)
            self.starts = append(self.starts, start)
            self.slots = append(self.slots, slot)
        self.sp = sp + 1
        if self.nvtx is not None:
            self.nvtx.push_traced(self.recorder.name_list[nid])

    def leave(self, key: object) -> bool:
        """A call returns: if it is the open traced call on top, write its end; else ignore it."""
        sp = self.sp - 1
        if sp < 0 or self.keys[sp] is not key:
            return False
        now = _clock() + self.recorder.clock_offset
        self.chunks[sp].set_end(self.rows[sp], self.starts[sp], now)
        self.traced_ends[self.slots[sp]] = self.buf.rows
        self.keys[sp] = None
        self.sp = sp
        if self.nvtx is not None:
            self.nvtx.pop_traced()
        return True

    def release(self) -> None:
        """Drop the frames of calls still open at stop (they would keep their locals alive)."""
        self.sp = 0
        self.keys = []
        self.chunks = []
        self.last_code = None

    def fix_nesting(self) -> None:
        """Re-parent this thread's user ranges, marks and memory events among its traced calls."""
        if len(self.traced_ends) == 0:
            return
        depth_of: dict[i64, i64] = {}  # non-traced rows: sequence number -> depth
        st_ids = vec[i64]()
        st_ends = vec[i64]()
        st_depths = vec[i64]()
        top: i64 = 0
        ti: i64 = 0
        r: i64 = 0
        for chunk in self.buf.chunks:
            n: i64 = len(chunk.seqs)
            for k in range(n):
                while top > 0 and st_ends[top - 1] <= r:
                    top -= 1
                rid = chunk.seq_at(k)  # ids and parents of one thread differ in these bits only
                parent = chunk.parent_seq_at(k)
                meta = chunk.meta[k]
                d: i64 = 0
                if meta & TRACED_BIT:
                    if top > 0 and st_ids[top - 1] == parent:
                        d = st_depths[top - 1] + 1
                    elif parent != 0:
                        d = depth_of.get(parent, -1) + 1
                    end = self.traced_ends[ti]
                    ti += 1
                    if top < len(st_ids):
                        st_ids[top] = rid
                        st_ends[top] = end
                        st_depths[top] = d
                    else:
                        st_ids = append(st_ids, rid)
                        st_ends = append(st_ends, end)
                        st_depths = append(st_depths, d)
                    top += 1
                else:
                    if top > 0 and (parent == 0 or st_ids[top - 1] > parent):
                        parent = st_ids[top - 1]
                        chunk.parents[k] = low32(parent)
                        d = st_depths[top - 1] + 1
                    elif parent != 0:
                        known = depth_of.get(parent)
                        d = known + 1 if known is not None else i64(meta >> DEPTH_SHIFT)
                    depth_of[rid] = d
                chunk.meta[k] = (meta & LOW_META) | i32(d << DEPTH_SHIFT)
                r += 1


class _NativeThread:
    """What the C hook keeps for one thread."""

    td: _ThreadData
    buf: _ThreadBuffer

    def __init__(self, td: _ThreadData, buf: _ThreadBuffer) -> None:
        self.td = td
        self.buf = buf


def merge_native_rows(buf: _ThreadBuffer, data: bytes, done: i64) -> i64:
    """Interleave one thread's C hook rows (``data``) with its recorder rows in start order,
    parenting and nesting every row as ``_ThreadTracer`` and ``fix_nesting`` do; returns how
    many rows were added. The traced rows are numbered from ``NATIVE_SEQ + done``."""
    t_start = vec[i64]()
    t_end = vec[i64]()
    t_user = vec[i64]()
    t_nid = vec[i32]()
    t_parent = vec[i64]()
    for values in struct.iter_unpack(NATIVE_ROW, data):
        t_start = append(t_start, values[0])
        t_end = append(t_end, values[1])
        t_user = append(t_user, values[2] & LOW32)
        t_nid = append(t_nid, values[3])
        t_parent = append(t_parent, values[4])
    nt: i64 = len(t_start)
    if nt == 0:
        return 0
    r_seq = vec[i64]()
    r_parent = vec[i64]()
    r_start = vec[i64]()
    r_end = vec[i64]()
    r_name = vec[i32]()
    r_meta = vec[i32]()
    for chunk in buf.chunks:
        ends: dict[i64, i64] = {}
        for j in range(len(chunk.big_end_rows)):
            ends[chunk.big_end_rows[j]] = chunk.big_ends[j]
        big: i64 = 0
        begin: i64 = 0
        for row in range(len(chunk.seqs)):
            gap = chunk.gaps[row]
            if gap == ESCAPED:
                begin = chunk.big_starts[big]
                big += 1
            else:
                begin += i64(gap)
            span = i64(chunk.spans[row])
            r_seq = append(r_seq, chunk.seq_at(row))
            r_parent = append(r_parent, chunk.parent_seq_at(row))
            r_start = append(r_start, begin)
            r_end = append(
                r_end, 0 if span == 0 else ends[row] if span == ESCAPED else begin + span - 1
            )
            r_name = append(r_name, chunk.names[row])
            r_meta = append(r_meta, chunk.meta[row])
    nr: i64 = len(r_seq)
    first = NATIVE_SEQ + done
    buf.cur = _Chunk(min(nr + nt, CHUNK_ROWS))  # rewritten in merged order (no spill: stopped)
    buf.chunks = [buf.cur]
    buf.cur_rows = 0
    buf.rows = 0
    new_of_old = vec[i64]()  # recorder row -> merged row
    t_pos = vec[i64]()  # traced row -> merged row
    seq_pos: dict[i64, i64] = {}  # recorder row's sequence number -> merged row
    depth_at = vec[i64]()  # merged row -> depth
    st_id = vec[i64]()  # the traced calls open at the current row (ends: 0 while open)
    st_pos = vec[i64]()
    st_end = vec[i64]()
    top: i64 = 0
    i: i64 = 0
    k: i64 = 0
    while i < nr or k < nt:
        traced = k < nt and (
            i >= nr
            or t_start[k] < r_start[i]
            or (t_start[k] == r_start[i] and t_user[k] != r_seq[i])
        )
        now = t_start[k] if traced else r_start[i]
        while top > 0 and st_end[top - 1] != 0 and st_end[top - 1] <= now:
            top -= 1
        parent: i64 = 0
        d: i64 = 0
        if traced:
            up = t_parent[k]
            user = t_user[k]
            user_pos = seq_pos.get(user, -1) if user != 0 else -1
            if up >= 0 and user_pos < t_pos[up]:
                parent = first + up
                d = depth_at[t_pos[up]] + 1
            elif user_pos >= 0:
                parent = user
                d = depth_at[user_pos] + 1
            rid = first + k
            end = t_end[k]
            pos = _write_row(buf, rid, parent, now, end, t_nid[k], TRACED_META & LOW_META, d)
            depth_at = append(depth_at, d)
            t_pos = append(t_pos, pos)
            if top < len(st_id):
                st_id[top] = rid
                st_pos[top] = pos
                st_end[top] = end
            else:
                st_id = append(st_id, rid)
                st_pos = append(st_pos, pos)
                st_end = append(st_end, end)
            top += 1
            k += 1
        else:
            parent = r_parent[i]
            meta = r_meta[i]
            if top > 0 and (parent == 0 or st_pos[top - 1] > seq_pos.get(parent, -1)):
                parent = st_id[top - 1]
                d = depth_at[st_pos[top - 1]] + 1
            elif parent != 0:
                known = seq_pos.get(parent, -1)
                d = depth_at[known] + 1 if known >= 0 else i64(meta >> DEPTH_SHIFT)
            seq = r_seq[i]
            pos = _write_row(buf, seq, parent, now, r_end[i], r_name[i], meta & LOW_META, d)
            depth_at = append(depth_at, d)
            seq_pos[seq] = pos
            new_of_old = append(new_of_old, pos)
            i += 1
    buf.extra_rows = [int(new_of_old[r]) for r in buf.extra_rows]
    buf.seq_rows = _moved(buf.seq_rows, new_of_old)
    buf.mem_rows = _moved(buf.mem_rows, new_of_old)
    buf.stack_rows = _moved(buf.stack_rows, new_of_old)
    return nt


def _moved(rows: vec[i64], new_of_old: vec[i64]) -> vec[i64]:
    out = vec[i64]()
    for r in rows:
        out = append(out, new_of_old[r])
    return out


def _write_row(
    buf: _ThreadBuffer, rid: i64, parent: i64, start: i64, end: i64, name: i32, low: i32, depth: i64
) -> i64:
    """Append one row (``end`` 0: open) to ``buf``; returns its number in the buffer."""
    row = buf.add_row(rid, parent, start, name, low | i32(depth << DEPTH_SHIFT))
    if end != 0:
        buf.cur.set_end(row, start, end)
    return buf.rows - 1
