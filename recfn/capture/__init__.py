"""The profiler and everything it records into: ``profile`` and its options
(``ProfilerConfig``), the per-thread columnar buffers (``_recorder``, compiled), call tracing
(``_tracer``, compiled, on the C hook where built), stack capture (``_stacks``, compiled), table
consolidation (``_table``), and the sinks that write while capturing: streamed dataset parts
(``_stream``), the flight recorder (``_flight``), followed child processes (``_follow``) and
the host identity every row carries (``_identity``)."""

from __future__ import annotations

from recfn.capture._flops import register_flops, unregister_flops
from recfn.capture._profiler import (
    RecordProfile,
    disable_profiler,
    enable_profiler,
    mark,
    profile,
    report_memory_usage,
    set_default_node_id,
)
from recfn.capture._stacks import CapturedTraceback, gather_traceback, symbolize_tracebacks
from recfn.capture.options import ProfilerConfig

__all__ = [
    "CapturedTraceback",
    "ProfilerConfig",
    "RecordProfile",
    "disable_profiler",
    "enable_profiler",
    "gather_traceback",
    "mark",
    "profile",
    "register_flops",
    "report_memory_usage",
    "set_default_node_id",
    "symbolize_tracebacks",
    "unregister_flops",
]
