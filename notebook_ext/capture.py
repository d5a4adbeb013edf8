"""Profiling one block of code for the magics and the CLI: options, the profiler, the outer range.

``Capture`` is a context manager: it starts a ``recfn.profile`` with the chosen options, opens a
USER_SCOPE range named after the cell or script, and on exit (normal, exception or
KeyboardInterrupt alike) stops the profiler and keeps what was captured as a ``Trace``. It never
swallows the exception: the caller decides how to show it.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

import recfn
from recfn.trace import Trace


class CaptureError(Exception):
    """A capture could not start (bad option, a profiler already running): a user mistake."""


@dataclasses.dataclass(frozen=True)
class ProfileOptions:
    """What to record: the ``recfn.profile`` options shared by the magics and ``recfn run``."""

    shapes: bool = False
    memory: bool = False
    stack: bool = False
    flops: bool = False
    sample: float = 1.0
    max_events: Optional[int] = None

    def __post_init__(self) -> None:
        if not 0.0 < self.sample <= 1.0:
            raise CaptureError(f"--sample must be a probability in (0, 1], got {self.sample}")
        if self.max_events is not None and self.max_events <= 0:
            raise CaptureError(f"--max-events must be a positive integer, got {self.max_events}")

    def profile_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "report_input_shapes": self.shapes,
            "profile_memory": self.memory,
            "with_stack": self.stack,
            "with_flops": self.flops,
            "sampling_prob": self.sample,
        }
        if self.max_events is not None:
            kwargs["max_events"] = self.max_events
        return kwargs

    def describe(self) -> dict[str, Any]:
        """The options as plain values (kept on the Trace, shown nowhere by default)."""
        return dataclasses.asdict(self)


def start_profile(options: ProfileOptions) -> recfn.profile:
    """Start a ``recfn.profile`` for ``options``; CaptureError if one already runs here."""
    prof = recfn.profile(**options.profile_kwargs())
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
    from recfn.io import trace_format

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


class Capture:
    """``with Capture(name, options) as cap: ...`` then ``cap.trace`` (also after an exception)."""

    def __init__(
        self,
        name: str,
        options: ProfileOptions,
        *,
        execution_count: Optional[int] = None,
        range_name: Optional[str] = None,
    ) -> None:
        self.name = name
        self.range_name = range_name or name
        self.options = options
        self.execution_count = execution_count
        self.trace: Optional[Trace] = None
        self._prof: Optional[recfn.profile] = None
        self._range: Optional[recfn.record_function] = None

    def __enter__(self) -> Capture:
        self._prof = start_profile(self.options)
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
            prof.stop()
        self.trace = Trace(
            prof.table,
            name=self.name,
            wall_ns=prof.wall_ns,
            error=describe_error(exc),
            execution_count=self.execution_count,
        )


def describe_error(exc: Optional[BaseException]) -> Optional[str]:
    """``"KeyboardInterrupt"`` or ``"ValueError: bad"`` for the header; None when all went well."""
    if exc is None:
        return None
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if len(first) > 80:
        first = first[:77] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
