"""The profiler: ``recfn.profile()`` records ranges, marks and memory events into an Arrow table.

It is an observer on the engine (the seed's profiler_legacy): a global ``Recorder`` callback, so
ranges from every thread are captured — threads started before or during profiling, plain
``threading.Thread``s, executor workers and asyncio tasks alike. Only one profiler may be enabled
per thread/context at a time.
"""

from __future__ import annotations

import contextvars
import os
import signal
import threading
import time
import tracemalloc
import warnings
from typing import TYPE_CHECKING, Any, Final, Optional, cast

from recfn.capture import _follow
from recfn.capture._flops import flop_formulas
from recfn.capture._recorder import KIND_MARK, KIND_MEMORY, Recorder
from recfn.capture._tracer import Tracer
from recfn.capture.options import ProfilerConfig, document_options
from recfn.engine import registry as _registry
from recfn.errors import RecfnStateError, RecfnTypeError, RecfnValueError
from recfn.gpu import CudaTimer, NvtxForwarder, forward_mark

if TYPE_CHECKING:  # pyarrow and pandas load on first use, keeping `import recfn` fast
    import pandas as pd
    import pyarrow as pa

    from recfn.capture._flight import FlightRing
    from recfn.capture._stream import DatasetWriter
    from recfn.formats.trace import Trace

FLIGHT_SIGNAL: Final = getattr(signal, "SIGUSR1", None)
"""The signal that makes a flight recorder write its dump (POSIX only)."""
FLIGHT_FILE: Final = "flight.parquet"
"""A flight recorder's dump in its process folder, when ``output`` is a dataset folder."""

_node_id = -1
_active: list[profile] = []
_active_lock = threading.Lock()
_context_profiler: contextvars.ContextVar[Optional[profile]] = contextvars.ContextVar(
    "recfn_profiler", default=None
)


def _forget_after_fork() -> None:
    """In a forked child, profilers inherited from the parent stop recording: their events so far
    are the parent's (``stop()`` still returns them, labelled with the parent's pid), and the
    child may start its own profiler."""
    global _active_lock
    _active_lock = threading.Lock()  # another thread of the parent may have held it
    for prof in _active:
        prof._orphan()
    _active.clear()
    inherited = _follow.following()
    if inherited is not None:  # the parent follows its children: profile this one
        _follow.start_in_child(*inherited)


os.register_at_fork(after_in_child=_forget_after_fork)


def set_default_node_id(node_id: int) -> None:
    """Tag events captured from now on with ``node_id`` (distributed runs; -1 by default)."""
    global _node_id
    if isinstance(node_id, bool) or not isinstance(node_id, int):
        raise RecfnTypeError(f"node_id must be an int, got {type(node_id).__name__}")
    if not -1 <= node_id < 2**31:
        raise RecfnValueError(f"node_id must be in [-1, 2**31), got {node_id}")
    _node_id = node_id


def get_default_node_id() -> int:
    return _node_id


def shape_of(value: object) -> tuple[list[int], str]:
    """Shape and dtype of a NumPy/torch/pandas value, else ``([], type name)``."""
    shape = getattr(value, "shape", None)
    if shape is not None:
        try:
            dims = [int(d) for d in shape]
        except (TypeError, ValueError):
            dims = []
        dtype = getattr(value, "dtype", None)
        if dtype is None and hasattr(value, "dtypes"):
            return dims, "mixed"
        return dims, str(dtype) if dtype is not None else type(value).__name__
    return [], type(value).__name__


class profile:
    """Profile a block: ``with recfn.profile() as prof: ...`` then ``prof.trace`` (a ``Trace``;
    ``prof.table``, ``prof.to_pandas()``, ``prof.save(path)`` are shortcuts to it).

    ``sampling_prob`` records that fraction of ranges (marks and memory events are always kept).
    ``nvtx=True`` also forwards every range of ``record_scopes`` (sampled or not) and every mark
    to NVTX, as ``recfn.emit_nvtx()`` does; ``cuda=True`` adds each range's GPU time
    (``device_start_ns``, ``device_duration_ns``, ``device``) from CUDA events.
    Also ``start()``/``stop()``. Events from every thread are captured while it runs. An exception
    (KeyboardInterrupt included) inside the block still stops the profiler and keeps the events.

    ``output="traces/"`` streams the capture into a Hive-partitioned Parquet dataset
    (``traces/hostname=<host>/process=<pid>/part-<n>.parquet``, see ``recfn.capture._stream``): full buffers are
    written as the program runs, so ``max_events`` bounds memory, not the events kept; ``trace``
    is then the dataset of this process's parts, read lazily. ``follow_children=True`` also
    profiles every child process (``multiprocessing`` fork and spawn, process pools,
    ``os.fork``) into the same dataset (``recfn.capture._follow``).

    ``flight_recorder=N`` keeps only the last N events (and the ranges still open) in memory
    (``recfn.capture._flight``) and writes them: when an exception escapes the block (not a
    ``SystemExit`` of status 0), when the process gets ``SIGUSR1`` (handler installed only when
    started on the main thread, chaining the one before it, restored by ``stop()``), and on
    demand (``dump()``). They go to ``output``: a trace file (``.parquet``, ``.json``, ...), or a
    dataset folder, where each process writes ``hostname=<host>/process=<pid>/flight.parquet``;
    without ``output`` an exception or a signal writes ``recfn-flight-<pid>.parquet`` in the
    current folder and warns where. ``stop()`` returns the last N events as the trace (and
    writes them to ``output`` when given).
    """

    def __init__(
        self,
        *,
        config: Optional[ProfilerConfig] = None,
        output: Any = None,
        follow_children: bool = False,
        **options: Any,
    ) -> None:
        if config is not None and not isinstance(config, ProfilerConfig):
            raise RecfnTypeError(f"config must be a ProfilerConfig, got {type(config).__name__}")
        if options or config is None:
            config = ProfilerConfig.from_options(options, base=config)
        self.config = config
        self.output: Optional[str] = None
        if output is not None:
            from recfn.formats.files import path_name

            self.output = path_name(output)
            if self._flight_file() is None and os.path.isfile(self.output):
                raise RecfnValueError(
                    f"output must be a folder for the dataset, not a file: {output!r}"
                )
        if follow_children and (self.output is None or self._flight_file() is not None):
            raise RecfnValueError("follow_children=True needs output= (a folder for the dataset)")
        self.follow_children = bool(follow_children)
        self._writer: Optional[DatasetWriter] = None
        self._ring: Optional[FlightRing] = None
        self._crash: Optional[str] = None  # the exception that escaped a flight-recorded block
        self._signal_handler: Any = None
        self._previous_handler: Any = None
        self._default_dump = ""
        self.dumps: list[str] = []
        """The files the flight recorder wrote, in order."""
        self._recorder: Optional[Recorder] = None
        self._tracer: Optional[Tracer] = None
        self._nvtx: Optional[NvtxForwarder] = None
        self._cuda: Optional[CudaTimer] = None
        self._handle = 0
        self._token: Optional[contextvars.Token[Optional[profile]]] = None
        self._started_tracemalloc = False
        self._start_ns = 0
        self._wall_ns = 0
        self._trace: Optional[Trace] = None
        self._remote: list[pa.Table] = []
        self._inherited = False  # running in the parent when this process forked
        self._error: Optional[str] = None  # the exception that ended the block, if any
        self._run_env: Optional[tuple[str, Optional[str]]] = None  # RECFN_RUN set, and before
        self._stopping: Optional[int] = None  # the thread running stop()
        self._later: list[tuple[int, Any]] = []  # (thread, what to do) once stopped

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._recorder is not None and not self._recorder.stopped

    def start(self) -> profile:
        """Begin capturing. Raises if a profiler is already enabled in this thread/context."""
        current = _context_profiler.get()
        if current is not None and current.running:
            raise RecfnStateError("profiler is already enabled on this thread")
        if self._recorder is not None:
            raise RecfnStateError("this profile was already started; create a new recfn.profile()")
        cfg = self.config
        recorder = Recorder(
            cfg.report_input_shapes,
            cfg.with_stack,
            cfg.with_flops,
            cfg.profile_memory,
            cfg.max_events,
            cfg.record_scopes,
            cfg.sampling_prob,
            flop_formulas(),
            shape_of,
        )
        recorder.node_id = _node_id
        tracer = None
        if cfg.trace_calls:  # raises before anything starts if sys.setprofile is taken
            tracer = Tracer(
                recorder,
                cfg.trace_include,
                cfg.trace_exclude,
                cfg.trace_max_depth,
                cfg.trace_c_calls,
                cfg.trace_user_code,
            )
        # Raise before anything starts: nvtx/torch missing, no CUDA device, NVTX already forwarded.
        cuda = CudaTimer(cfg.record_scopes) if cfg.cuda else None
        if cfg.nvtx:
            forwarder = NvtxForwarder(cfg.report_input_shapes, cfg.record_scopes)
            forwarder.start()
            self._nvtx = forwarder
            if tracer is not None and forwarder.attached:
                tracer.nvtx = forwarder
        if cfg.profile_memory and not tracemalloc.is_tracing():
            tracemalloc.start()
            self._started_tracemalloc = True
        self._start_ns = time.time_ns()
        recorder.clock_offset = self._start_ns - time.perf_counter_ns()
        if cfg.flight_recorder is not None:
            from recfn.capture._flight import FlightRing  # numpy and pyarrow: only when recording

            self._ring = FlightRing(recorder, cfg.to_dict(), self._start_ns, cfg.flight_recorder)
            self._ring.attach()
            self._default_dump = os.path.abspath(f"recfn-flight-{recorder.pid}.parquet")
        elif self.output is not None:
            from recfn.capture._stream import (
                DatasetWriter,  # numpy and pyarrow: only when streaming
            )

            writer = DatasetWriter(
                self.output,
                recorder,
                self.config.to_dict(),
                self._start_ns,
                flush_interval=cfg.flush_interval,
                run=self._start_run() if self.follow_children else None,
            )
            try:
                writer.attach(cfg.max_events)  # writes the part that says the capture started
            except BaseException:  # not started: undo what was
                self._end_run()
                if self._nvtx is not None:
                    self._nvtx.stop()
                if self._started_tracemalloc:
                    tracemalloc.stop()
                raise
            writer.after_write = self._after_write
            self._writer = writer
        if self.follow_children:  # ``output`` is then a dataset folder (checked when created)
            _follow.follow(cast(str, self.output), self.config)
        self._recorder = recorder
        self._token = _context_profiler.set(self)
        with _active_lock:
            _active.append(self)
        recorder.use_native_rows(tracer is not None)  # after streaming/flight attached
        if self._writer is None:  # a streaming capture wrote its start mark as its first part
            recorder.record_instant("__start_profile", KIND_MARK, 0, "")
        self._handle = _registry.add_global_callback(recorder)
        if cuda is not None:
            self._cuda = cuda
            cuda.start(recorder.clock_offset)
        if tracer is not None:
            self._tracer = tracer
            tracer.start()
        if self._ring is not None:
            self._install_signal()
        return self

    def _start_run(self) -> str:
        """The run this profile and the processes it starts belong to (``RECFN_RUN``): the
        one it inherited, else a new one, set in the environment while it records."""
        import uuid

        from recfn.formats.dataset import RUN_ENV

        inherited = os.environ.get(RUN_ENV)
        if inherited:
            return inherited
        run = uuid.uuid4().hex[:16]
        self._run_env = (run, inherited)
        os.environ[RUN_ENV] = run
        return run

    def _end_run(self) -> None:
        from recfn.formats.dataset import RUN_ENV

        if self._run_env is None:
            return
        run, before = self._run_env
        self._run_env = None
        if os.environ.get(RUN_ENV) == run:
            if before is None:
                os.environ.pop(RUN_ENV, None)
            else:
                os.environ[RUN_ENV] = before

    def stop_later(self, then: Any) -> bool:
        """When this thread is writing a part or stopping this profile now (a signal handler
        interrupted it), arrange for ``stop()`` and then ``then()`` once that is done, and
        return True; else False (the caller may stop it now)."""
        here = threading.get_ident()
        writer = self._writer
        if self._stopping == here or (writer is not None and writer.busy()):
            self._later.append((here, then))
            return True
        return False

    def _after_write(self) -> None:
        """A part was written on this thread: do what a signal handler left for then."""
        here = threading.get_ident()
        if not any(thread == here for thread, _ in self._later) or self._stopping == here:
            return
        if self.running:
            self.stop()  # runs what was left, at its end
        else:
            self._run_later()

    def _run_later(self) -> None:
        here = threading.get_ident()
        mine = [then for thread, then in self._later if thread == here]
        self._later = [(thread, then) for thread, then in self._later if thread != here]
        for then in mine:
            then()

    def _orphan(self) -> None:
        """Stop recording in a forked child (see ``_forget_after_fork``)."""
        recorder = self._recorder
        if recorder is not None and not recorder.stopped:
            _registry.remove_callback(self._handle)
            recorder.stopped = True
            self._inherited = True
            if self._tracer is not None:  # frees sys.monitoring's tool for the child's own
                self._tracer.stop()

    def stop(self) -> Trace:
        """Stop capturing and consolidate the events; returns the ``Trace`` (also ``.trace``).

        With ``output`` (a dataset), what is left is written as the last part; a part that
        cannot be written is counted as dropped and warned about, never raised."""
        self._stopping = threading.get_ident()
        try:
            return self._stop()
        finally:
            self._stopping = None
            self._end_run()
            if self._later:
                self._run_later()

    def _stop(self) -> Trace:
        recorder = self._recorder
        inherited = self._inherited and self._trace is None
        if recorder is None or (recorder.stopped and not inherited):
            raise RecfnStateError(
                "profiler is not running: call start() (or use it as a context manager) first"
            )
        if self._writer is not None and not inherited:
            self._writer.stop_flushing()
        if not inherited:
            _registry.remove_callback(self._handle)
            recorder.record_instant("__stop_profile", KIND_MARK, 0, "")
            recorder.stopped = True
        recorder.release_frames()
        if self._tracer is not None:
            self._tracer.stop()  # uninstalls, then re-parents user ranges among traced calls
        if self._nvtx is not None:
            self._nvtx.stop()
        device_times = self._cuda.stop() if self._cuda is not None else None
        with _active_lock:
            if self in _active:
                _active.remove(self)
        if self._token is not None:
            try:
                _context_profiler.reset(self._token)
            except ValueError:  # stopped from another context
                pass
            self._token = None
        if self._started_tracemalloc:
            tracemalloc.stop()
        self._wall_ns = time.time_ns() - self._start_ns
        from recfn.capture._table import build_table
        from recfn.formats.trace import Trace

        if self.follow_children and not inherited:
            _follow.unfollow()
        if self._ring is not None:
            self._restore_signal()
            recorder.spill = None
            table = self._ring.snapshot(self._crash or "stop")
            self._trace = Trace(table, name="flight recorder", wall_ns=self._wall_ns)
            if not inherited and (self.output is not None or self._crash is not None):
                self._write_dump(table, None)
            return self._trace
        if self._writer is not None and not inherited:
            files = self._writer.finish(self._wall_ns, self._error)
            self._trace = self._dataset_trace(files, recorder)
            self._warn_dropped(recorder, self._writer.errors)
            return self._trace
        table = build_table(
            recorder,
            start_ns=self._start_ns,
            node_id=recorder.node_id,
            config=self.config.to_dict(),
            wall_ns=self._wall_ns,
            device_times=device_times,
            call_stats=None if self._tracer is None else self._tracer.stats,
        )
        if self._error is not None:  # said by the table too, so by the files it is saved as
            from recfn.formats.schema import ERROR_KEY

            metadata = dict(table.schema.metadata or {})
            metadata[ERROR_KEY.encode()] = self._error.encode()
            table = table.replace_schema_metadata(metadata)
        self._trace = Trace(table, name="profile", wall_ns=self._wall_ns, error=self._error)
        self._warn_dropped(recorder, [])
        return self._trace

    def _dataset_trace(self, files: list[str], recorder: Recorder) -> Trace:
        """This process's parts, read lazily; what they do not say (a last part that could not
        be written) from the recorder."""
        from recfn.formats.trace import Trace

        dropped = int(recorder.dropped)
        files = [name for name in files if os.path.exists(name)]  # the folder may be gone
        if files:
            return Trace.from_files(
                files,
                name="profile",
                wall_ns=self._wall_ns,
                error=self._error,
                dropped_events=dropped,
            )
        from recfn.capture import _identity
        from recfn.formats import schema

        metadata = schema.build_metadata(
            config=self.config.to_dict(),
            dropped_events=dropped,
            start_ns=self._start_ns,
            wall_ns=self._wall_ns,
            pid=int(recorder.pid),
            host=_identity.host(),
        )
        table = schema.empty_table().replace_schema_metadata(metadata)
        return Trace(table, name="profile", wall_ns=self._wall_ns, error=self._error)

    def _warn_dropped(self, recorder: Recorder, write_errors: list[str]) -> None:
        """Warn that events were dropped, and why: parts that could not be written (the
        first error named), else ``max_events``."""
        if write_errors:
            warnings.warn(
                f"recfn: {len(write_errors)} part(s) could not be written to {self.output!r} "
                f"(first: {write_errors[0]}); {recorder.dropped} events were dropped (their count "
                "is in the last part's metadata 'recfn.dropped_events')",
                RuntimeWarning,
                stacklevel=3,
            )
        elif recorder.dropped:
            warnings.warn(
                f"recfn: max_events={self.config.max_events} reached; {recorder.dropped} events "
                "were dropped (their count is in the table metadata 'recfn.dropped_events')",
                RuntimeWarning,
                stacklevel=3,
            )

    def __enter__(self) -> profile:
        return self.start()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if isinstance(exc, BaseException) and not (
            isinstance(exc, SystemExit) and exc.code in (0, None)
        ):
            text = str(exc).strip().splitlines()
            self._crash = f"exception: {type(exc).__name__}" + (f": {text[0][:80]}" if text else "")
            from recfn.formats.trace import describe_error

            self._error = describe_error(exc)  # said by the trace and its files
        self.stop()

    # -- the flight recorder --------------------------------------------------------------------

    def dump(self, path: Any = None) -> Trace:
        """The flight recorder's last N events (and the ranges still open) now, as a ``Trace``;
        recording goes on. Also written to ``path`` (by its suffix, as ``save``), else to
        ``output`` when the profile has one (see the class docstring). RuntimeError unless
        started with ``flight_recorder=N``."""
        from recfn.formats.trace import Trace

        ring = self._ring
        if ring is None:
            raise RecfnStateError("dump() needs a profile started with flight_recorder=N")
        table = ring.snapshot("demand")
        if path is not None or self.output is not None:
            self._write_dump(table, path)
        return Trace(table, name="flight recorder")

    def _dump_target(self) -> str:
        """Where a dump goes without a path (see the class docstring)."""
        if self.output is None:
            return self._default_dump
        if self._flight_file() is not None:
            return self.output
        from recfn.capture import _identity
        from recfn.capture._stream import process_folder

        folder = process_folder(self.output, _identity.host(), os.getpid())
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, FLIGHT_FILE)

    def _flight_file(self) -> Optional[str]:
        """``output`` when this flight recorder writes to one trace file, else None."""
        from recfn.formats.dataset import TRACE_SUFFIXES

        name = self.output
        if self.config.flight_recorder is None or name is None or os.path.isdir(name):
            return None
        return name if name.lower().endswith(TRACE_SUFFIXES) else None

    def _write_dump(self, table: pa.Table, path: Any) -> None:
        """Write a dump: to ``path`` as ``save`` does (its errors raise), else to the dump
        target, where a failure only warns (an exception or a signal is being handled)."""
        from recfn.formats.io import save

        target = path if path is not None else self._dump_target()
        try:
            save(table, target)
        except Exception as exc:
            if path is not None:
                raise
            warnings.warn(
                f"recfn: flight recorder could not write {target}: {exc}", RuntimeWarning, 2
            )
            return
        self.dumps.append(os.fspath(target))
        if self.output is None and path is None:  # a file the user did not name: say where
            warnings.warn(
                f"recfn: flight recorder wrote its last {self.config.flight_recorder} events "
                f"to {target}",
                RuntimeWarning,
                stacklevel=3,
            )

    def _install_signal(self) -> None:
        """Dump on ``FLIGHT_SIGNAL`` (main thread only: Python runs handlers there)."""
        if FLIGHT_SIGNAL is None or threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(FLIGHT_SIGNAL)

        def handler(signum: int, frame: Any) -> None:
            from recfn.capture._flight import dump_in_background

            ring = self._ring
            if ring is not None and self.running:
                dump_in_background(ring, lambda table: self._write_dump(table, None))
            if callable(previous):
                previous(signum, frame)

        signal.signal(FLIGHT_SIGNAL, handler)
        self._signal_handler, self._previous_handler = handler, previous

    def _restore_signal(self) -> None:
        handler = self._signal_handler
        if handler is None or FLIGHT_SIGNAL is None:
            return
        if threading.current_thread() is threading.main_thread():
            if signal.getsignal(FLIGHT_SIGNAL) is handler:
                previous = self._previous_handler
                signal.signal(FLIGHT_SIGNAL, previous if previous is not None else signal.SIG_DFL)
            self._signal_handler = None

    # -- events from outside ranges -------------------------------------------------------------

    def record_instant(self, name: str, kind: int, nbytes: int, device: str) -> None:
        recorder = self._recorder
        if recorder is not None:
            recorder.record_instant(name, kind, nbytes, device)

    def add_events(self, table: pa.Table) -> None:
        """Merge events captured in another process or node (their node_id and pid are kept)."""
        from recfn.formats.schema import validate

        self._remote.append(validate(table, "add_events"))

    # -- results ------------------------------------------------------------------------------

    @property
    def trace(self) -> Trace:
        """The finished capture (RuntimeError before ``stop()``), with merged remote events."""
        if self._trace is None:
            raise RecfnStateError("no events yet: the profiler has not been stopped")
        if self._remote:
            from recfn.formats.trace import merge

            self._trace = merge(
                [self._trace, *self._remote], name=self._trace.name, wall_ns=self._wall_ns
            )
            self._remote.clear()
        return self._trace

    @property
    def dropped_events(self) -> int:
        return 0 if self._recorder is None else int(self._recorder.dropped)

    @property
    def wall_ns(self) -> int:
        return self._wall_ns

    @property
    def table(self) -> pa.Table:
        """The events as a ``pyarrow.Table`` (see docs/schema.md)."""
        return self.trace.table

    def to_pandas(self) -> pd.DataFrame:
        """The events as a DataFrame (categoricals; nullable ints as ``Int64``) with ``df.recfn``."""
        return self.trace.to_pandas()

    def save(self, path: Any, *, overwrite: bool = False) -> None:
        """Write the events: Parquet for ``.parquet``/``.pq`` (``recfn.load`` reads them back
        exactly), Chrome/Perfetto JSON for ``.json``/``.json.gz``; ValueError for other names.
        Atomic, and polite: see ``Trace.save`` for ``overwrite``."""
        self.trace.save(path, overwrite=overwrite)

    def _repr_html_(self) -> Optional[str]:
        """The trace's header and summary in notebooks, once stopped."""
        return None if self._trace is None else self.trace._repr_html_()

    def __repr__(self) -> str:
        if self._trace is None:
            state = "running" if self.running else "not started"
            return f"<recfn.profile {state}>"
        trace = self.trace
        return (
            f"<recfn.profile {trace.events} events, {trace.threads} threads, "
            f"{self._wall_ns / 1e6:.1f} ms, {self.dropped_events} dropped>"
        )


document_options(profile)
_follow.make_profile = lambda output, config: profile(
    config=config, output=output, follow_children=True
)


def enable_profiler(config: Optional[ProfilerConfig] = None) -> profile:
    """Start a profiler for this thread/context (``disable_profiler()`` stops it)."""
    return profile(config=config or ProfilerConfig()).start()


def disable_profiler() -> Trace:
    """Stop the profiler enabled in this thread/context and return its ``Trace``."""
    prof = _context_profiler.get()
    if prof is None or not prof.running:
        raise RecfnStateError(
            "profiler is not enabled on this thread: call recfn.enable_profiler() first"
        )
    return prof.stop()


def mark(name: str) -> None:
    """An instant event in every running profiler (child of the innermost open range), and an
    NVTX mark while ranges are forwarded to NVTX."""
    if not isinstance(name, str):
        raise RecfnTypeError(f"mark name must be a str, got {type(name).__name__}")
    forward_mark(name)
    for prof in list(_active):
        prof.record_instant(name, KIND_MARK, 0, "")


def report_memory_usage(nbytes: int, device: str = "cpu") -> None:
    """Record an allocation (positive) or a free (negative) of ``nbytes`` on ``device``."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int):
        raise RecfnTypeError(f"nbytes must be an int, got {type(nbytes).__name__}")
    if not isinstance(device, str) or not device:
        raise RecfnTypeError(f"device must be a non-empty str, got {device!r}")
    for prof in list(_active):
        prof.record_instant("[memory]", KIND_MEMORY, nbytes, device)


class RecordProfile:
    """Profile a block and save the trace on exit (``profile.save``: the format from the suffix)."""

    def __init__(
        self, path: Any, *, config: Optional[ProfilerConfig] = None, **options: Any
    ) -> None:
        from recfn.formats.io import trace_format

        trace_format(path)  # an unknown suffix fails before the block runs
        self.path = path
        self.profile = profile(config=config, **options)

    def __enter__(self) -> profile:
        return self.profile.start()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.profile.stop()
        self.profile.save(self.path)
