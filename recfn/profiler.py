"""The profiler: ``recfn.profile()`` records ranges, marks and memory events into an Arrow table.

It is an observer on the engine (the seed's profiler_legacy): a global ``Recorder`` callback, so
ranges from every thread are captured — threads started before or during profiling, plain
``threading.Thread``s, executor workers and asyncio tasks alike. Only one profiler may be enabled
per thread/context at a time.
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
import threading
import time
import tracemalloc
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Optional

from recfn import _registry
from recfn._recorder import KIND_MARK, KIND_MEMORY, Recorder, default_stack
from recfn._tracer import Tracer
from recfn._tracer import check_options as check_trace_options
from recfn.flops import flop_formulas
from recfn.scope import RecordScope, as_scope

if TYPE_CHECKING:  # pyarrow and pandas load on first use, keeping `import recfn` fast
    import pandas as pd
    import pyarrow as pa

DEFAULT_MAX_EVENTS = 5_000_000  # 40 bytes a range: about 200 MB at most

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


os.register_at_fork(after_in_child=_forget_after_fork)


def set_default_node_id(node_id: int) -> None:
    """Tag events captured from now on with ``node_id`` (distributed runs; -1 by default)."""
    global _node_id
    if isinstance(node_id, bool) or not isinstance(node_id, int):
        raise TypeError(f"node_id must be an int, got {type(node_id).__name__}")
    if not -1 <= node_id < 2**31:
        raise ValueError(f"node_id must be in [-1, 2**31), got {node_id}")
    _node_id = node_id


def get_default_node_id() -> int:
    return _node_id


@dataclasses.dataclass(frozen=True)
class ProfilerConfig:
    """What a profile records. ``record_scopes`` (None: all) limits ranges to those scopes."""

    report_input_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    max_events: int = DEFAULT_MAX_EVENTS
    record_scopes: Optional[tuple[RecordScope, ...]] = None
    sampling_prob: float = 1.0
    # trace_calls (recfn._tracer): a FUNCTION-scope range per Python call (and C call) of the
    # profiled threads, every one (sampling_prob samples the other ranges); include/exclude
    # are fnmatch patterns on "module.qualname" or "module".
    trace_calls: bool = False
    trace_c_calls: bool = False
    trace_include: Optional[tuple[str, ...]] = None
    trace_exclude: Optional[tuple[str, ...]] = None
    trace_max_depth: Optional[int] = None

    def __post_init__(self) -> None:
        for field in ("report_input_shapes", "profile_memory", "with_stack", "with_flops"):
            if not isinstance(getattr(self, field), bool):
                raise TypeError(
                    f"ProfilerConfig.{field} must be a bool, got {getattr(self, field)!r}"
                )
        if isinstance(self.max_events, bool) or not isinstance(self.max_events, int):
            raise TypeError(f"ProfilerConfig.max_events must be an int, got {self.max_events!r}")
        if self.max_events <= 0:
            raise ValueError(f"ProfilerConfig.max_events must be positive, got {self.max_events}")
        if isinstance(self.sampling_prob, bool) or not isinstance(self.sampling_prob, (int, float)):
            raise TypeError(
                f"ProfilerConfig.sampling_prob must be a number, got {self.sampling_prob!r}"
            )
        if not 0.0 <= self.sampling_prob <= 1.0:
            raise ValueError(
                f"ProfilerConfig.sampling_prob must be in [0, 1], got {self.sampling_prob}"
            )
        if self.record_scopes is not None:
            if isinstance(self.record_scopes, (str, int)):
                raise TypeError("ProfilerConfig.record_scopes must be a collection of RecordScope")
            scopes = tuple(as_scope(s) for s in self.record_scopes)
            if not scopes:
                raise ValueError("ProfilerConfig.record_scopes is empty: nothing would be recorded")
            object.__setattr__(self, "record_scopes", scopes)
        include, exclude = check_trace_options(
            self.trace_calls,
            self.trace_c_calls,
            self.trace_include,
            self.trace_exclude,
            self.trace_max_depth,
            self.record_scopes,
        )
        object.__setattr__(self, "trace_include", include)
        object.__setattr__(self, "trace_exclude", exclude)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if self.record_scopes is not None:
            out["record_scopes"] = [s.label for s in self.record_scopes]
        return out


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
    """Profile a block: ``with recfn.profile() as prof: ...`` then ``prof.table()``.

    ``sampling_prob`` records that fraction of ranges (marks and memory events are always kept).
    Also ``start()``/``stop()``. Events from every thread are captured while it runs. An exception
    (KeyboardInterrupt included) inside the block still stops the profiler and keeps the events.
    """

    def __init__(
        self,
        report_input_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        max_events: int = DEFAULT_MAX_EVENTS,
        record_scopes: Optional[Iterable[Any]] = None,
        sampling_prob: float = 1.0,
        *,
        config: Optional[ProfilerConfig] = None,
        trace_calls: bool = False,
        trace_c_calls: bool = False,
        trace_include: Optional[Iterable[str]] = None,
        trace_exclude: Optional[Iterable[str]] = None,
        trace_max_depth: Optional[int] = None,
    ) -> None:
        if config is None:
            config = ProfilerConfig(
                report_input_shapes=report_input_shapes,
                profile_memory=profile_memory,
                with_stack=with_stack,
                with_flops=with_flops,
                max_events=max_events,
                record_scopes=None if record_scopes is None else tuple(record_scopes),
                sampling_prob=sampling_prob,
                trace_calls=trace_calls,
                trace_c_calls=trace_c_calls,
                trace_include=_as_tuple(trace_include),
                trace_exclude=_as_tuple(trace_exclude),
                trace_max_depth=trace_max_depth,
            )
        elif not isinstance(config, ProfilerConfig):
            raise TypeError(f"config must be a ProfilerConfig, got {type(config).__name__}")
        self.config = config
        self._recorder: Optional[Recorder] = None
        self._tracer: Optional[Tracer] = None
        self._handle = 0
        self._token: Optional[contextvars.Token[Optional[profile]]] = None
        self._started_tracemalloc = False
        self._start_ns = 0
        self._wall_ns = 0
        self._table: Optional[pa.Table] = None
        self._remote: list[pa.Table] = []
        self._inherited = False  # running in the parent when this process forked

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._recorder is not None and not self._recorder.stopped

    def start(self) -> profile:
        """Begin capturing. Raises if a profiler is already enabled in this thread/context."""
        current = _context_profiler.get()
        if current is not None and current.running:
            raise RuntimeError("profiler is already enabled on this thread")
        if self._recorder is not None:
            raise RuntimeError("this profile was already started; create a new recfn.profile()")
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
            default_stack,
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
            )
        if cfg.profile_memory and not tracemalloc.is_tracing():
            tracemalloc.start()
            self._started_tracemalloc = True
        self._start_ns = time.time_ns()
        recorder.clock_offset = self._start_ns - time.perf_counter_ns()
        self._recorder = recorder
        self._token = _context_profiler.set(self)
        with _active_lock:
            _active.append(self)
        recorder.record_instant("__start_profile", KIND_MARK, 0, "")
        self._handle = _registry.add_global_callback(recorder)
        if tracer is not None:
            self._tracer = tracer
            tracer.start()
        return self

    def _orphan(self) -> None:
        """Stop recording in a forked child (see ``_forget_after_fork``)."""
        recorder = self._recorder
        if recorder is not None and not recorder.stopped:
            _registry.remove_callback(self._handle)
            recorder.stopped = True
            self._inherited = True

    def stop(self) -> profile:
        """Stop capturing and consolidate the events into a table."""
        recorder = self._recorder
        inherited = self._inherited and self._table is None
        if recorder is None or (recorder.stopped and not inherited):
            raise RuntimeError(
                "profiler is not running: call start() (or use it as a context manager) first"
            )
        if not inherited:
            _registry.remove_callback(self._handle)
            recorder.record_instant("__stop_profile", KIND_MARK, 0, "")
            recorder.stopped = True
        if self._tracer is not None:
            self._tracer.stop()  # uninstalls, then re-parents user ranges among traced calls
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
        from recfn._table import build_table

        self._table = build_table(
            recorder,
            start_ns=self._start_ns,
            node_id=recorder.node_id,
            config=self.config.to_dict(),
        )
        if recorder.dropped:
            warnings.warn(
                f"recfn: max_events={self.config.max_events} reached; {recorder.dropped} events "
                "were dropped (their count is in the table metadata 'recfn.dropped_events')",
                RuntimeWarning,
                stacklevel=2,
            )
        return self

    def __enter__(self) -> profile:
        return self.start()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.stop()

    # -- events from outside ranges -------------------------------------------------------------

    def record_instant(self, name: str, kind: int, nbytes: int, device: str) -> None:
        recorder = self._recorder
        if recorder is not None:
            recorder.record_instant(name, kind, nbytes, device)

    def add_events(self, table: pa.Table) -> None:
        """Merge events captured in another process or node (their node_id and pid are kept)."""
        from recfn.io import check_trace_table

        check_trace_table(table, "add_events")
        self._remote.append(table)

    # -- results --------------------------------------------------------------------------------

    @property
    def dropped_events(self) -> int:
        return 0 if self._recorder is None else int(self._recorder.dropped)

    @property
    def wall_ns(self) -> int:
        return self._wall_ns

    def table(self) -> pa.Table:
        """The events as a ``pyarrow.Table`` (see docs/schema.md)."""
        if self._table is None:
            raise RuntimeError("no events yet: the profiler has not been stopped")
        from recfn._table import merge_tables

        return merge_tables(self._table, self._remote)

    def to_pandas(self) -> pd.DataFrame:
        """The events as a DataFrame (categoricals; nullable ints as ``Int64``) with ``df.recfn``."""
        from recfn.io import table_to_pandas

        return table_to_pandas(self.table())

    def save(self, path: Any) -> None:
        """Write the events as Parquet (zstd); ``recfn.load(path)`` reads them back exactly."""
        from recfn.io import save

        save(self.table(), path)

    def export_chrome_trace(self, path: Any) -> None:
        """Write a Chrome/Perfetto JSON trace (``.json`` or ``.json.gz``)."""
        from recfn.io import export_chrome_trace

        export_chrome_trace(self.table(), path)

    def _repr_html_(self) -> Optional[str]:
        """Header and summary table in notebooks (drawn by notebook_ext)."""
        if self._table is None:
            return None
        from recfn.notebook_ext.trace import Trace

        html: str = Trace.from_profile(self)._repr_html_()
        return html

    def __repr__(self) -> str:
        if self._table is None:
            state = "running" if self.running else "not started"
            return f"<recfn.profile {state}>"
        table = self._table
        threads = len(set(table.column("thread_id").to_pylist())) if table.num_rows else 0
        return (
            f"<recfn.profile {table.num_rows} events, {threads} threads, "
            f"{self._wall_ns / 1e6:.1f} ms, {self.dropped_events} dropped>"
        )


def _as_tuple(patterns: Optional[Iterable[str]]) -> Optional[tuple[str, ...]]:
    if patterns is None:
        return None
    return (patterns,) if isinstance(patterns, str) else tuple(patterns)


def enable_profiler(config: Optional[ProfilerConfig] = None) -> profile:
    """Start a profiler for this thread/context (``disable_profiler()`` stops it)."""
    return profile(config=config or ProfilerConfig()).start()


def disable_profiler() -> profile:
    """Stop the profiler enabled in this thread/context and return it (its table is ready)."""
    prof = _context_profiler.get()
    if prof is None or not prof.running:
        raise RuntimeError(
            "profiler is not enabled on this thread: call recfn.enable_profiler() first"
        )
    return prof.stop()


def mark(name: str) -> None:
    """An instant event in every running profiler (child of the innermost open range)."""
    if not isinstance(name, str):
        raise TypeError(f"mark name must be a str, got {type(name).__name__}")
    for prof in list(_active):
        prof.record_instant(name, KIND_MARK, 0, "")


def report_memory_usage(nbytes: int, device: str = "cpu") -> None:
    """Record an allocation (positive) or a free (negative) of ``nbytes`` on ``device``."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int):
        raise TypeError(f"nbytes must be an int, got {type(nbytes).__name__}")
    if not isinstance(device, str) or not device:
        raise TypeError(f"device must be a non-empty str, got {device!r}")
    for prof in list(_active):
        prof.record_instant("[memory]", KIND_MEMORY, nbytes, device)


class RecordProfile:
    """Profile a block and write the trace on exit: Parquet, or Chrome JSON for ``.json``/``.json.gz``."""

    def __init__(self, path: Any, **options: Any) -> None:
        from recfn.io import trace_format

        self.path = path
        self._format = trace_format(path)
        self.profile = profile(**options)

    def __enter__(self) -> profile:
        return self.profile.start()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.profile.stop()
        if self._format == "chrome":
            self.profile.export_chrome_trace(self.path)
        else:
            self.profile.save(self.path)
