"""Profiling one block of code for the magics and the CLI: the profiler and the outer range.

``Capture`` is a context manager: it starts a ``recfn.profile`` with the given ``ProfilerConfig``,
opens a USER_SCOPE range named after the cell or script, and on exit (normal, exception or
KeyboardInterrupt alike) stops the profiler and keeps what was captured as a ``Trace``. It never
swallows the exception: the caller decides how to show it.
"""

from __future__ import annotations

import dataclasses
import os
import time
import weakref
from typing import Any, Final, Optional

import recfn
from recfn.capture.options import ProfilerConfig
from recfn.errors import CaptureError, RecfnStateError
from recfn.formats.trace import Trace, describe_error


def start_profile(
    config: ProfilerConfig, *, output: Optional[str] = None, follow_children: bool = False
) -> recfn.profile:
    """Start a ``recfn.profile`` for ``config`` (streaming into the dataset ``output``, and
    following child processes, when given); CaptureError if one already runs here, or when
    what an option needs is missing (``cuda=True`` without torch or a CUDA device, ``nvtx=True``
    without the nvtx package)."""
    prof = recfn.profile(config=config, output=output, follow_children=follow_children)
    try:
        prof.start()
    except ImportError as exc:  # torch or nvtx not installed
        raise CaptureError(str(exc).removeprefix("recfn: ")) from None
    except RecfnStateError as exc:
        if "already enabled" in str(exc):
            raise CaptureError(
                "a recfn profiler is already running on this thread; stop it first "
                "(recfn.disable_profiler() or leave its `with recfn.profile()` block)"
            ) from None
        raise CaptureError(str(exc).removeprefix("recfn: ")) from None  # no CUDA device, ...
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
    def started(self) -> bool:
        """Whether its profile started (a CaptureError before then: it could not)."""
        return self._prof is not None

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
            stopping = time.perf_counter_ns()
            prof.__exit__(exc_type, exc, tb)  # a flight recorder dumps on an exception
            stop_ns = time.perf_counter_ns() - stopping
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
        recording = _estimate(self.trace) + stop_ns
        _OVERHEAD[self.trace] = (recording, self.trace.wall_ns + stop_ns)


CALIBRATION_CALLS = 2_000
CALIBRATION_SOURCE = """
def leaf():
    pass

def calls(count):
    for _ in range(count):
        leaf()

def c_calls(count):
    empty = ()
    for _ in range(count):
        len(empty)

class Point:
    def __init__(self):
        self.x = 1.5
        self.named = {"k": 2}

def bytecode(count):
    point = Point()
    named = point.named
    total = 0.0
    for i in range(count):
        total += point.x * 2.0 + named["k"] - i % 3
        if total > 1e12:
            total = 0.0
    return total
"""
"""Calibration workloads, compiled as user code (module ``__main__``, no file): ``leaf`` calls
are recorded unless a pattern excludes them; ``bytecode`` runs Python code without calls."""
BYTECODE_STEPS = 20 * CALIBRATION_CALLS


@dataclasses.dataclass(frozen=True)
class RecordingCosts:
    """What recording costs in this process, in ns (``recording_costs``): a recorded range
    (``range_ns``), a recorded traced call, both its callbacks included (``call_ns``), and one
    callback of the call tracer on a call it does not record, Python (``python_callback_ns``)
    or C (``c_callback_ns``: sys.setprofile sees every C call). ``python_slowdown``: how much
    slower Python code runs while calls are traced (3.11's profile function turns specialised
    instructions off: about 2x; 1.0 where it costs nothing)."""

    range_ns: float
    call_ns: float
    python_callback_ns: float
    c_callback_ns: float
    python_slowdown: float


NO_COSTS: Final = RecordingCosts(0.0, 0.0, 0.0, 0.0, 1.0)
_costs: Optional[RecordingCosts] = None
_OVERHEAD: weakref.WeakKeyDictionary[Trace, tuple[int, int]] = weakref.WeakKeyDictionary()


def _ranges(count: int) -> None:
    for _ in range(count):
        with recfn.record_function("calibration"):
            pass


def _timed(run: Any, steps: int, **options: Any) -> tuple[float, float, dict[str, Any]]:
    """The best of three times (so a busy machine inflates them less) of ``run(steps)`` plain
    and under a profile with ``options``, in ns, and that profile's call tracing counts
    (``recfn.call_tracing``; empty without tracing)."""
    best_plain = best_profiled = float("inf")
    counts: dict[str, Any] = {}
    for _ in range(3):
        began = time.perf_counter_ns()
        run(steps)
        best_plain = min(best_plain, time.perf_counter_ns() - began)
        with recfn.profile(max_events=4 * CALIBRATION_CALLS, **options) as prof:
            began = time.perf_counter_ns()
            run(steps)
            best_profiled = min(best_profiled, time.perf_counter_ns() - began)
        counts = call_tracing(prof.trace)
    return best_plain, best_profiled, counts


def _extra_ns(run: Any, **options: Any) -> tuple[float, dict[str, Any]]:
    """Nanoseconds that ``run(CALIBRATION_CALLS)`` takes longer under a profile with
    ``options``, and that profile's call tracing counts."""
    plain, profiled, counts = _timed(run, CALIBRATION_CALLS, **options)
    return max(profiled - plain, 0.0), counts


def _per(extra_ns: float, count: int) -> float:
    return extra_ns / count if count > 0 else 0.0


def recording_costs() -> RecordingCosts:
    """What recording costs in this process (measured on the first call: a few milliseconds);
    no costs when a profiler already runs here."""
    global _costs
    if _costs is None:
        workloads: dict[str, Any] = {"__name__": "__main__"}
        exec(compile(CALIBRATION_SOURCE, "<recfn calibration>", "exec"), workloads)
        follow: dict[str, Any] = {"trace_calls": True, "trace_user_code": True}
        unrecorded = {**follow, "trace_exclude": ["__main__::leaf"]}
        try:
            range_extra, _ = _extra_ns(_ranges)
            call_extra, _ = _extra_ns(workloads["calls"], **follow)
            python_extra, python_counts = _extra_ns(workloads["calls"], **unrecorded)
            c_extra, c_counts = _extra_ns(workloads["c_calls"], **unrecorded)
            plain, profiled, _ = _timed(workloads["bytecode"], BYTECODE_STEPS, **follow)
        except RuntimeError:  # a profiler is running: the capture will say so
            return NO_COSTS
        _costs = RecordingCosts(
            range_ns=_per(range_extra, CALIBRATION_CALLS),
            call_ns=_per(call_extra, CALIBRATION_CALLS),
            python_callback_ns=_per(python_extra, python_counts["callbacks"]["python"]),
            c_callback_ns=_per(c_extra, c_counts["callbacks"]["c"]),
            python_slowdown=max(profiled / plain, 1.0) if plain > 0 else 1.0,
        )
    return _costs


def call_tracing(trace: Trace) -> dict[str, Any]:
    """What the call tracer did in ``trace`` (its metadata ``recfn.call_tracing``), or {}."""
    from recfn.formats.schema import CALL_TRACING_KEY, json_object

    return json_object(trace.metadata.get(CALL_TRACING_KEY)) or {}


def _estimate(trace: Trace) -> int:
    """The cost of recording ``trace``: its ranges, and with call tracing its recorded calls,
    every callback on a call the tracer saw but did not record, and (3.10-3.11) the slowdown
    of the time the traced threads ran Python code, at this process's costs."""
    import pyarrow.compute as pc

    costs = recording_costs()
    table = trace.table
    ranges = 0
    if table.num_rows:
        ranges = pc.sum(pc.equal(table.column("kind"), "range")).as_py() or 0
    tracing = call_tracing(trace)
    callbacks = tracing.get("callbacks", {})
    recorded = int(tracing.get("recorded", 0))
    python_callbacks = int(callbacks.get("python", 0))
    c_callbacks = int(callbacks.get("c", 0))
    ranges -= min(recorded, ranges)
    callbacks_ns = (
        recorded * costs.call_ns
        + max(python_callbacks - 2 * recorded, 0) * costs.python_callback_ns
        + c_callbacks * costs.c_callback_ns
    )
    python_ns = max(int(tracing.get("python_ns", 0)) - callbacks_ns, 0.0)
    slowed_ns = python_ns * (1.0 - 1.0 / costs.python_slowdown)
    return int(ranges * costs.range_ns + callbacks_ns + slowed_ns)


def estimated_overhead_ns(trace: Trace) -> Optional[int]:
    """What recording cost a trace captured here, in ns: its ranges and traced calls, the call
    tracer's callbacks on the calls it saw but did not record (counted; each at the cost
    ``recording_costs`` measured once per process) and the time taken to stop and build the
    table (measured). None for traces not captured in this process."""
    measured = _OVERHEAD.get(trace)
    return None if measured is None else measured[0]


def overhead_share(trace: Trace) -> Optional[float]:
    """``estimated_overhead_ns`` as a share of the time the capture took (its wall time plus
    stopping); None for traces not captured in this process."""
    measured = _OVERHEAD.get(trace)
    if measured is None:
        return None
    recording, elapsed = measured
    return recording / elapsed if elapsed > 0 else 0.0
