"""Profiling one block of code for the magics and the CLI: the profiler and the outer range.

``Capture`` is a context manager: it starts a ``recfn.profile`` with the given ``ProfilerConfig``,
opens a USER_SCOPE range named after the cell or script, and on exit (normal, exception or
KeyboardInterrupt alike) stops the profiler and keeps what was captured as a ``Trace``. It never
swallows the exception: the caller decides how to show it.
"""

from __future__ import annotations

import os
import time
import weakref
from typing import Any, Optional

import recfn
from recfn.capture.options import ProfilerConfig
from recfn.errors import CaptureError
from recfn.formats.trace import Trace, describe_error


def start_profile(
    config: ProfilerConfig, *, output: Optional[str] = None, follow_children: bool = False
) -> recfn.profile:
    """Start a ``recfn.profile`` for ``config`` (streaming into the dataset ``output``, and
    following child processes, when given); CaptureError if one already runs here."""
    prof = recfn.profile(config=config, output=output, follow_children=follow_children)
    try:
        prof.start()
    except RuntimeError as exc:
        if "already enabled" in str(exc):
            raise CaptureError(
                "a recfn profiler is already running on this thread; stop it first "
                "(recfn.disable_profiler() or leave its `with recfn.profile()` block)"
            ) from None
        raise
    return prof


def check_output_path(path: str, what: str = "--save") -> str:
    """Fail before any work if ``path`` cannot be a trace file (suffix, folder)."""
    from recfn.formats.io import trace_format

    try:
        trace_format(path)
    except ValueError as exc:
        raise CaptureError(f"{what}: {exc}") from None
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CaptureError(f"{what}: folder {folder!r} does not exist")
    if os.path.isdir(path):
        raise CaptureError(f"{what}: {path!r} is a folder")
    return path


def dataset_folder(path: str, what: str = "--save") -> Optional[str]:
    """``path`` when it names a folder for a dataset (it ends in a separator or is a folder),
    else None; CaptureError when the folder's parent does not exist."""
    if not (path.endswith(("/", os.sep)) or os.path.isdir(path)):
        return None
    parent = os.path.dirname(os.path.abspath(path.rstrip("/" + os.sep)))
    if not os.path.isdir(parent):
        raise CaptureError(f"{what}: folder {parent!r} does not exist")
    return path


class Capture:
    """``with Capture(name, config) as cap: ...`` then ``cap.trace`` (also after an exception)."""

    def __init__(
        self,
        name: str,
        config: Optional[ProfilerConfig] = None,
        *,
        execution_count: Optional[int] = None,
        range_name: Optional[str] = None,
        dataset: Optional[str] = None,
        output_file: Optional[str] = None,
    ) -> None:
        self.name = name
        self.range_name = range_name or name
        self.config = config or ProfilerConfig()
        self.execution_count = execution_count
        self.dataset = dataset  # a folder: stream into it, following child processes
        self.output_file = output_file  # where a flight recorder writes its dumps
        self.trace: Optional[Trace] = None
        self._prof: Optional[recfn.profile] = None
        self._range: Optional[recfn.record_function] = None

    @property
    def dumps(self) -> list[str]:
        """The files a flight recorder (``--flight-recorder N``) wrote."""
        return [] if self._prof is None else list(self._prof.dumps)

    def __enter__(self) -> Capture:
        recording_costs()  # calibrated before the capture, once per process
        flight_file = self.output_file if self.config.flight_recorder is not None else None
        self._prof = start_profile(
            self.config,
            output=self.dataset or flight_file,
            follow_children=self.dataset is not None,
        )
        self._range = recfn.record_function(self.range_name)
        self._range.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        __tracebackhide__ = True
        prof, rng = self._prof, self._range
        assert prof is not None and rng is not None
        try:
            rng.__exit__(exc_type, exc, tb)
        finally:
            prof.__exit__(exc_type, exc, tb)  # a flight recorder dumps on an exception
        if self.dataset is not None and prof.trace.files:  # this process's parts, read lazily
            self.trace = Trace.from_files(prof.trace.files, name=self.name, wall_ns=prof.wall_ns)
            self.trace.error = describe_error(exc)
            self.trace.execution_count = self.execution_count
            return
        self.trace = Trace(
            prof.table,
            name=self.name,
            wall_ns=prof.wall_ns,
            error=describe_error(exc),
            execution_count=self.execution_count,
        )
        _OVERHEAD[self.trace] = _estimate(self.trace, self.config)


CALIBRATION_CALLS = 2_000
_costs: Optional[tuple[float, float]] = None
_OVERHEAD: weakref.WeakKeyDictionary[Trace, int] = weakref.WeakKeyDictionary()


def _leaf() -> None:
    pass


def _calls(count: int) -> None:
    for _ in range(count):
        _leaf()


def _ranges(count: int) -> None:
    for _ in range(count):
        with recfn.record_function("calibration"):
            pass


def _extra_ns(run: Any, **options: Any) -> float:
    """Nanoseconds per step that ``run`` takes longer under a profile with ``options``
    (best of three, so a busy machine inflates it less)."""
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter_ns()
        run(CALIBRATION_CALLS)
        plain = time.perf_counter_ns() - began
        with recfn.profile(max_events=4 * CALIBRATION_CALLS, **options):
            began = time.perf_counter_ns()
            run(CALIBRATION_CALLS)
            profiled = time.perf_counter_ns() - began
        best = min(best, max(profiled - plain, 0) / CALIBRATION_CALLS)
    return best


def recording_costs() -> tuple[float, float]:
    """What one recorded range and one traced call cost in this process, in ns (measured on the
    first call: a few milliseconds); (0, 0) when a profiler already runs here."""
    global _costs
    if _costs is None:
        try:
            _costs = (_extra_ns(_ranges), _extra_ns(_calls, trace_calls=True))
        except RuntimeError:  # a profiler is running: the capture will say so
            return 0.0, 0.0
    return _costs


def _estimate(trace: Trace, config: ProfilerConfig) -> int:
    import pyarrow.compute as pc

    per_range, per_call = recording_costs()
    table = trace.table
    if not table.num_rows:
        return 0
    ranges = pc.sum(pc.equal(table.column("kind"), "range")).as_py() or 0
    calls = 0
    if config.trace_calls:
        calls = pc.sum(pc.equal(table.column("scope"), "function")).as_py() or 0
        ranges -= min(calls, ranges)
    return int(ranges * per_range + calls * per_call)


def estimated_overhead_ns(trace: Trace) -> Optional[int]:
    """A lower bound of the recording overhead of a trace captured here: its ranges times the
    calibrated cost of one (``recording_costs``). With ``trace_calls`` every call below the depth
    bound or outside the patterns still runs the tracer's callback, which this does not count
    (on pandas code at depth 4 that is most of it: see benchmarks/bench_notebook.py).
    None for traces not captured in this process."""
    return _OVERHEAD.get(trace)
