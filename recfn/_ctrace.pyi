"""Types of recfn._ctrace, the C profile hook behind trace_calls (``recfn/_ctrace.c``)."""

from typing import Any

ROW_BYTES: int

class ThreadState:
    @property
    def info(self) -> Any: ...
    def take(self) -> bytes: ...

class CTracer:
    def __init__(
        self,
        tracer: Any,
        gate: Any,
        current_var: Any,
        max_events: int,
        max_depth: int,
        clock_offset: int,
        c_calls: bool,
    ) -> None: ...
    @property
    def threads(self) -> list[ThreadState]: ...
    def attach(self) -> None: ...
    def thread_hook(self, frame: Any, event: str, arg: Any, /) -> None: ...
    def stop(self) -> None: ...
