"""The clocks the C hook of trace_calls can run on, for the tracing tests."""

from __future__ import annotations

import pytest

from recfn.capture import _tracer

NATIVE_CLOCKS = ["tsc", "clock_gettime"]


def native_clock(monkeypatch: pytest.MonkeyPatch, clock: str) -> None:
    """Run the C hook on ``clock``: "tsc" (skipped where the kernel's clock is not the TSC or
    the hook is not built) or "clock_gettime"."""
    if not _tracer.native_available():
        pytest.skip("recfn.native._ctrace is not built (pure install)")
    if clock == "tsc" and not _tracer._NATIVE.TSC:
        pytest.skip("the kernel's clocksource is not the TSC")
    monkeypatch.setattr(_tracer, "NATIVE_TSC", clock == "tsc")
