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
import site
import struct
import sys
import sysconfig
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
from recfn.native.constants import (
    CHUNK_ROWS,
    CODE_KIND_MASK,
    CODE_KIND_SHIFT,
    CODE_LIBRARY,
    CODE_PACKAGE_SHIFT,
    CODE_RECFN,
    CODE_USER,
    ESCAPED,
    NAME_EXCLUDED,
    NAME_NOT_NOW,
)

TRACED_BIT: Final[i32] = LOW_META + 1  # marks traced rows until fix_nesting clears it
TRACED_META: Final[i32] = SCOPE_FUNCTION | TRACED_BIT
NOT_ENDED: Final[i64] = 1 << 62
NO_LIMIT: Final[i64] = 1 << 62
ALWAYS_EXCLUDED: Final = ("recfn", "recfn.*", "mypy_extensions")  # recfn, and its pure-mode helpers
USES_MONITORING: Final = sys.version_info >= (3, 12)
PACKAGE_DIRS: Final = ("site-packages", "dist-packages")  # where installers put packages

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
    user_code: object = False,
) -> tuple[Optional[tuple[str, ...]], Optional[tuple[str, ...]]]:
    """Validate the ``trace_*`` profiler options; returns include/exclude as tuples."""
    for field, value in (
        ("trace_calls", trace_calls),
        ("trace_c_calls", trace_c_calls),
        ("trace_user_code", user_code),
    ):
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
    if user_code and not trace_calls:
        raise RecfnValueError("ProfilerConfig.trace_user_code needs trace_calls=True")
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
    against the module name alone (or a package holding it), against ``module.qualname`` and
    against the recorded name ``module::qualname``; ``max_depth`` bounds how many traced calls
    nest.

    ``follow`` (trace_user_code) records only the calls of user code (``code_kind``) and the
    library calls that user code makes (entry points); the library calls below an entry point
    are counted (hidden), by innermost traced call and by package, not recorded. ``include``
    then names library code to record as if it were user code, rather than narrowing.
    """

    recorder: Recorder
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    max_depth: i64
    c_calls: bool
    follow: bool
    library_roots: tuple[str, ...]  # folders of the standard library and installed packages
    packages: list[str]  # the top-level packages of library code, by number
    package_ids: dict[str, i64]
    stats: Optional[CallStats]  # what tracing did, once stopped
    names: dict[int, i64]  # id(code) -> code info (name id, kind, package)
    c_names: dict[int, i32]  # id(C function) -> name id, or NAME_EXCLUDED
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
        follow: bool = False,
    ) -> None:
        self.recorder = recorder
        self.include = include or ()
        self.exclude = exclude or ()
        self.max_depth = NO_LIMIT if max_depth is None else max_depth
        self.c_calls = c_calls
        self.follow = follow
        self.library_roots = library_roots() if follow else ()
        self.packages = []
        self.package_ids = {}
        self.stats = None
        self.names = {}
        self.c_names = {}
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
        stats = CallStats(self.follow)
        self.stats = stats
        if native is not None:
            self._merge_native(native)
            stats.name_packages(self.packages)
            return
        # Other threads drop their profile function at their next event (recorder.stopped).
        with self._lock:
            threads = list(self.threads)
        for tt in threads:
            tt.fix_nesting()
            tt.release()
            stats.add_thread(tt)
        stats.name_packages(self.packages)

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
            self.follow,
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
            if self.stats is not None:  # the rows above are numbered from NATIVE_SEQ + done
                self.stats.add_native(state, (info.td.tid << TID_SHIFT) | (NATIVE_SEQ + done))
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

    def code_name(self, code: types.CodeType, frame: Optional[types.FrameType]) -> i64:
        """The code info of a Python function's code (recfn/native/constants.py): its name id
        (NAME_EXCLUDED when filtered out), whose code it is and its package; cached by
        identity. NAME_NOT_NOW when it cannot be named now."""
        key = id(code)
        info = self.names.get(key)
        if info is None:
            module = _module_of(code, frame)
            qualname = str(getattr(code, "co_qualname", code.co_name))
            nid = self.classify(module, qualname)
            if nid == NAME_NOT_NOW:
                return i64(NAME_NOT_NOW)
            kind = self.code_kind(module, qualname, code.co_filename)
            package: i64 = 0
            if kind == CODE_LIBRARY:
                package = self.package_id(module.partition(".")[0])
            info = (i64(nid) & LOW32) | (kind << CODE_KIND_SHIFT) | (package << CODE_PACKAGE_SHIFT)
            self.names[key] = info
            self.keep.append(code)
        return info

    def code_kind(self, module: str, qualname: str, filename: str) -> i64:
        """Whose code this is: recfn's (``ALWAYS_EXCLUDED``), user code (the running script or
        notebook, ``__main__``; with ``follow`` also what ``include`` names) or library code
        (the standard library and installed packages, by file; code made from a string
        counts as its module's, library code when that has no file)."""
        for pattern in ALWAYS_EXCLUDED:
            if fnmatch.fnmatchcase(module, pattern):
                return CODE_RECFN
        if module == "__main__":
            return CODE_USER
        full, name = f"{module}.{qualname}", f"{module}::{qualname}"
        if self.follow and self.include and _matches(self.include, module, full, name):
            return CODE_USER
        return CODE_LIBRARY if self.is_library_file(filename, module) else CODE_USER

    def is_library_file(self, filename: str, module: str) -> bool:
        """Whether ``filename`` (of code in ``module``) belongs to the standard library or an
        installed package."""
        if filename.startswith("<"):  # <frozen ...>, <string>: code not read from its own file
            if filename.startswith("<frozen"):
                return True
            source = getattr(sys.modules.get(module), "__file__", None)
            if not isinstance(source, str) or source.startswith("<"):
                return True
            filename = source
        path = os.path.normcase(os.path.abspath(filename))
        for folder in PACKAGE_DIRS:
            if f"{os.sep}{folder}{os.sep}" in path:
                return True
        return path.startswith(self.library_roots)

    def package_id(self, package: str) -> i64:
        number = self.package_ids.get(package)
        if number is None:
            number = len(self.packages)
            self.packages.append(package)
            self.package_ids[package] = number
        return number

    def outer_caller_kind(self, code: types.CodeType, frame: Optional[types.FrameType]) -> i64:
        """The kind of the code that called ``code`` from a frame that ran before tracing
        began: ``frame``'s caller (3.10-3.11), else the frame below the one running ``code``."""
        back: Optional[types.FrameType] = None
        if frame is not None:
            back = frame.f_back
        else:
            back = sys._getframe(0)
            while back is not None and back.f_globals.get("__name__") == __name__:
                back = back.f_back  # this tracer's own frames (pure Python)
            if back is not None and back.f_code is code:
                back = back.f_back
        if back is None:
            return CODE_LIBRARY
        info = self.code_name(back.f_code, back)
        return CODE_LIBRARY if info < 0 else (info >> CODE_KIND_SHIFT) & CODE_KIND_MASK

    def c_name(self, fn: object) -> i32:
        """Name id for a C function or method; methods bound to an object or a type (made anew
        at each access) are cached by (that type, name)."""
        owner = getattr(fn, "__self__", None)
        if owner is None or isinstance(owner, types.ModuleType):
            key = id(fn)
            nid = self.c_names.get(key)
            if nid is None:
                nid = self.classify_c(fn, owner)
                if nid != NAME_NOT_NOW:
                    self.c_names[key] = nid
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
        if self.include and not self.follow and not _matches(self.include, module, full, name):
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
            tt.py_events += 1
            if self.follow:  # every call is seen (and counted): nothing is disabled
                tt.follow_call(code, None, code)
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
            tt.py_events += 1
            if self.follow:
                tt.pop_caller(code)
                tt.leave(code)
                return False
            if tt.leave(code):
                return False
            info = self.names.get(id(code))
            return info is not None and _info_nid(info) == NAME_EXCLUDED
        except Exception:
            self.report()
        return False

    def on_call(self, code: types.CodeType, offset: int, fn: object, arg0: object) -> object:
        if self.recorder.stopped:
            return None
        try:
            tt = self._thread()
            if tt is None:
                return None
            tt.c_events += 1
            if isinstance(fn, (types.FunctionType, types.MethodType, type)):
                return None
            records = tt.records_c_calls_of(code, None)  # only C calls of traced (user) code
            if records <= 0:
                return self.disable if records == 0 else None  # CALL is a local event
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
                    tt.c_events += 1
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
    """Whether a pattern matches the module or a package holding it, ``module.qualname`` or
    the recorded name."""
    for pattern in patterns:
        if (
            fnmatch.fnmatchcase(full, pattern)
            or fnmatch.fnmatchcase(module, pattern)
            or fnmatch.fnmatchcase(name, pattern)
        ):
            return True
        package = module
        while "." in package:
            package = package.rpartition(".")[0]
            if fnmatch.fnmatchcase(package, pattern):
                return True
    return False


def _info_nid(info: i64) -> i32:
    """The name id in a code info's low 32 bits (NAME_EXCLUDED is stored unsigned)."""
    low = info & LOW32
    return i32(low - (1 << 32)) if low >= (1 << 31) else i32(low)


def library_roots() -> tuple[str, ...]:
    """The folders of the standard library and of installed packages (site-packages and
    the like, also those on ``sys.path``), normalised, each ending in a separator."""
    folders: list[str] = []
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        folder = paths.get(key)
        if folder:
            folders.append(folder)
    getsitepackages: Any = getattr(site, "getsitepackages", None)
    if getsitepackages is not None:
        folders.extend(getsitepackages())
    user_site = site.getusersitepackages()
    if isinstance(user_site, str):
        folders.append(user_site)
    folders.extend(
        entry
        for entry in sys.path
        if entry and os.path.basename(entry.rstrip(os.sep)) in PACKAGE_DIRS
    )
    roots: list[str] = []
    for folder in folders:
        for form in (os.path.abspath(folder), os.path.realpath(folder)):
            root = os.path.join(os.path.normcase(form), "")
            if root not in roots:
                roots.append(root)
    return tuple(roots)


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
    hidden_open: vec[i64]  # library calls hidden while each open traced call was innermost
    # every traced call of this thread, in start order, for fix_nesting
    traced_ends: vec[i64]  # the buffer's row count when it returned (NOT_ENDED while open)
    last_code: object
    last_info: i64
    call_event: object  # the str objects CPython passes as "call" and "return" events
    return_event: object
    # following user code: every Python call open since tracing began, with its kind as the
    # calls it makes see it (a call's key: its frame on 3.10-3.11, its code on 3.12+)
    follow: bool
    caller_keys: list[object]
    caller_kinds: vec[i64]
    n_callers: i64
    # what the tracer did: callbacks on Python calls and on C calls, rows written, and the
    # hidden library calls, by traced call (id, count pairs) and by package number
    py_events: i64
    c_events: i64
    recorded: i64
    hidden_pairs: vec[i64]
    package_hidden: vec[i64]
    # 3.10-3.11: the time this thread ran Python code, which a profile function slows (3.11
    # turns specialised instructions off), told from time in C functions by the call events:
    # what each open call runs (1: Python, 0: C), and since when Python code has run
    runs: vec[i64]
    n_runs: i64
    python_ns: i64
    python_since: i64

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
        self.hidden_open = vec[i64]()
        self.traced_ends = vec[i64]()
        self.last_code = None
        self.last_info = i64(NAME_NOT_NOW)
        self.call_event = None
        self.return_event = None
        self.follow = owner.follow
        self.caller_keys = []
        self.caller_kinds = vec[i64]()
        self.n_callers = 0
        self.py_events = 0
        self.c_events = 0
        self.recorded = 0
        self.hidden_pairs = vec[i64]()
        self.package_hidden = vec[i64]()
        self.runs = vec[i64]()
        self.n_runs = 0
        self.python_ns = 0
        self.python_since = _clock()

    def __call__(self, frame: types.FrameType, event: str, arg: object) -> None:
        """``sys.setprofile`` events of this thread (3.10-3.11)."""
        if self.recorder.stopped:
            sys.setprofile(None)
            return
        try:
            # CPython passes the same event str objects every time: compare identities first.
            if event is self.call_event:
                self.py_events += 1
                self.push_run(1)
                if self.follow:
                    self.follow_call(frame.f_code, frame, frame)
                else:
                    nid = self.code_nid(frame.f_code, frame)
                    if nid >= 0:
                        self.enter(frame, nid)
            elif event is self.return_event:
                self.py_events += 1
                self.pop_run()
                if self.follow:
                    self.pop_caller(frame)
                self.leave(frame)
            elif event == "call" or event == "return":
                self.learn_event(frame, event)
            else:
                self.c_events += 1
                if event == "c_call":
                    self.push_run(0)
                else:
                    self.pop_run()
                if self.c_calls:
                    if event == "c_call":
                        # only C calls made by traced (or user) code, never recfn's own, which
                        # may hold its locks
                        if self.records_c_calls_of(frame.f_code, frame) > 0:
                            nid = self.owner.c_name(arg)
                            if nid >= 0:
                                self.enter(arg, nid)
                    else:  # c_return, c_exception
                        self.leave(arg)
        except Exception:
            self.owner.report()

    def runs_python(self) -> i64:
        return 1 if self.n_runs == 0 or self.runs[self.n_runs - 1] else 0

    def switch_run(self, was: i64, python: i64) -> None:
        """The innermost call now runs Python code (1) or C (0), from ``was``."""
        if was != python:
            if was:
                self.python_ns += _clock() - self.python_since
            else:
                self.python_since = _clock()

    def push_run(self, python: i64) -> None:
        self.switch_run(self.runs_python(), python)
        if self.n_runs < len(self.runs):
            self.runs[self.n_runs] = python
        else:
            self.runs = append(self.runs, python)
        self.n_runs += 1

    def pop_run(self) -> None:
        if self.n_runs > 0:  # else a frame that was running before tracing began
            self.n_runs -= 1
            self.switch_run(self.runs[self.n_runs], self.runs_python())

    def python_time(self) -> i64:
        """The time this thread ran Python code under the profile function, in ns (3.10-3.11)."""
        if USES_MONITORING:
            return 0
        total = self.python_ns
        if self.runs_python():
            total += _clock() - self.python_since
        return total

    def learn_event(self, frame: types.FrameType, event: str) -> None:
        """First "call"/"return" event: remember the str object CPython uses, then handle it."""
        if event == "call":
            self.call_event = event
        else:
            self.return_event = event
        self(frame, event, None)

    def code_info(self, code: types.CodeType, frame: Optional[types.FrameType]) -> i64:
        if code is self.last_code:
            return self.last_info
        info = self.owner.code_name(code, frame)
        if info != NAME_NOT_NOW:
            self.last_code = code
            self.last_info = info
        return info

    def code_nid(self, code: types.CodeType, frame: Optional[types.FrameType]) -> i32:
        info = self.code_info(code, frame)
        return NAME_NOT_NOW if info < 0 else _info_nid(info)

    def records_c_calls_of(self, code: types.CodeType, frame: Optional[types.FrameType]) -> i64:
        """Whether C calls made by ``code`` are recorded: made by user code when following
        it, else by traced code (1 or 0); -1 when ``code`` cannot be named now."""
        info = self.code_info(code, frame)
        if info < 0:
            return -1
        if self.follow:
            return 1 if (info >> CODE_KIND_SHIFT) & CODE_KIND_MASK == CODE_USER else 0
        return 1 if _info_nid(info) >= 0 else 0

    def follow_call(
        self, code: types.CodeType, frame: Optional[types.FrameType], key: object
    ) -> None:
        """A Python call while following user code (``key``: what its exit will name). User
        code is recorded; library code when user code called it (an entry point), else it is
        only counted (hidden). Library code that recfn calls passes recfn's kind on, so recfn's
        own work is neither recorded nor counted as hidden."""
        info = self.code_info(code, frame)
        if info < 0:
            return  # cannot be named now: its callees see its caller's kind
        caller: i64 = 0
        if self.n_callers > 0:
            caller = self.caller_kinds[self.n_callers - 1]
        else:
            caller = self.owner.outer_caller_kind(code, frame)
        kind = (info >> CODE_KIND_SHIFT) & CODE_KIND_MASK
        self.push_caller(key, CODE_RECFN if kind == CODE_LIBRARY and caller == CODE_RECFN else kind)
        nid = _info_nid(info)
        if kind == CODE_USER or (kind == CODE_LIBRARY and caller == CODE_USER):
            if nid >= 0:
                self.enter(key, nid)
        elif kind == CODE_LIBRARY and caller == CODE_LIBRARY:
            self.hide(info >> CODE_PACKAGE_SHIFT)

    def push_caller(self, key: object, kind: i64) -> None:
        n = self.n_callers
        if n < len(self.caller_keys):
            self.caller_keys[n] = key
            self.caller_kinds[n] = kind
        else:
            self.caller_keys.append(key)
            self.caller_kinds = append(self.caller_kinds, kind)
        self.n_callers = n + 1

    def pop_caller(self, key: object) -> None:
        n = self.n_callers - 1
        if n >= 0 and self.caller_keys[n] is key:
            self.caller_keys[n] = None
            self.n_callers = n

    def hide(self, package: i64) -> None:
        """One library call counted, not recorded: on the innermost traced call and its package."""
        if self.sp > 0:
            self.hidden_open[self.sp - 1] += 1
        while len(self.package_hidden) <= package:
            self.package_hidden = append(self.package_hidden, 0)
        self.package_hidden[package] += 1

    def keep_hidden(self, sp: i64) -> None:
        """Keep how many library calls were hidden under the open traced call ``sp``."""
        hidden = self.hidden_open[sp]
        if hidden > 0:
            self.hidden_pairs = append(self.hidden_pairs, self.ids[sp])
            self.hidden_pairs = append(self.hidden_pairs, hidden)

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
        self.recorded += 1
        if sp < len(self.keys):
            self.keys[sp] = key
            self.chunks[sp] = buf.cur
            self.ids[sp] = rid
            self.rows[sp] = row
            self.starts[sp] = start
            self.slots[sp] = slot
            self.hidden_open[sp] = 0
        else:
            self.keys.append(key)
            self.chunks.append(buf.cur)
            self.ids = append(self.ids, rid)
            self.rows = append(self.rows, row)
            self.starts = append(self.starts, start)
            self.slots = append(self.slots, slot)
            self.hidden_open = append(self.hidden_open, 0)
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
        self.keep_hidden(sp)
        self.keys[sp] = None
        self.sp = sp
        if self.nvtx is not None:
            self.nvtx.pop_traced()
        return True

    def release(self) -> None:
        """Drop the frames of calls still open at stop (they would keep their locals alive),
        keeping what they hid."""
        for sp in range(self.sp):
            self.keep_hidden(sp)
        self.sp = 0
        self.keys = []
        self.chunks = []
        self.caller_keys = []
        self.n_callers = 0
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


class CallStats:
    """What call tracing did (``Tracer.stats``, once stopped): its callbacks on Python calls
    and on C calls (recorded or not: what the recording overhead is made of), the calls it
    recorded and, following user code, the library calls it hid (counted, not recorded).

    ``hidden_parts`` holds, per thread, ``(id base, int64 (offset, count) pairs)``: the traced
    call with id ``base + offset`` hid ``count`` library calls; ``hidden_by_package`` sums them
    by top-level package.
    """

    follow: bool
    python_callbacks: i64
    c_callbacks: i64
    recorded: i64
    python_ns: i64  # 3.10-3.11: time the traced threads ran Python code (0 on 3.12+)
    hidden_parts: list[tuple[int, object]]
    hidden_by_package: dict[str, int]
    package_counts: vec[i64]  # by package number, until name_packages

    def __init__(self, follow: bool) -> None:
        self.follow = follow
        self.python_callbacks = 0
        self.c_callbacks = 0
        self.recorded = 0
        self.python_ns = 0
        self.hidden_parts = []
        self.hidden_by_package = {}
        self.package_counts = vec[i64]()

    def add_thread(self, tt: _ThreadTracer) -> None:
        """A Python tracer's thread (its pairs hold whole ids: base 0)."""
        self.python_callbacks += tt.py_events
        self.c_callbacks += tt.c_events
        self.recorded += tt.recorded
        self.python_ns += tt.python_time()
        if len(tt.hidden_pairs):
            self.hidden_parts.append((0, tt.hidden_pairs))
        for number in range(len(tt.package_hidden)):
            self._add_package(number, tt.package_hidden[number])

    def add_native(self, state: Any, id_base: int) -> None:
        """A C hook thread (``recfn.native._ctrace.ThreadState``) whose rows were numbered
        from ``id_base``."""
        python_callbacks, c_callbacks, recorded, python_ns = state.counts
        self.python_callbacks += python_callbacks
        self.c_callbacks += c_callbacks
        self.recorded += recorded
        self.python_ns += python_ns
        rows, packages = state.take_hidden()
        if len(rows):
            self.hidden_parts.append((id_base, rows))
        counts: Any = memoryview(packages).cast("q")
        for number in range(len(counts)):
            self._add_package(number, counts[number])

    def _add_package(self, number: i64, count: i64) -> None:
        while len(self.package_counts) <= number:
            self.package_counts = append(self.package_counts, 0)
        self.package_counts[number] += count

    def name_packages(self, packages: list[str]) -> None:
        """``hidden_by_package`` from the counts by number, most hidden first."""
        named = [
            (packages[number], int(self.package_counts[number]))
            for number in range(min(len(packages), len(self.package_counts)))
            if self.package_counts[number] > 0
        ]
        named.sort(key=lambda item: (-item[1], item[0]))
        self.hidden_by_package = dict(named)

    def to_dict(self) -> dict[str, object]:
        """As stored in the trace metadata (``recfn.call_tracing``)."""
        return {
            "user_code": self.follow,
            "callbacks": {"python": int(self.python_callbacks), "c": int(self.c_callbacks)},
            "recorded": int(self.recorded),
            "python_ns": int(self.python_ns),
            "hidden": dict(self.hidden_by_package),
        }


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
