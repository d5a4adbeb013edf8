"""Types of recfn.native._csummary, the out-of-core summary's one pass and the order statistics
of its calls (``recfn/native/_csummary.c``)."""

from collections.abc import Sequence
from typing import Any

OK: int
NOT_RECORDED: int
ENDS_BEFORE_START: int
DANGLING_PARENT: int
MAX_GROUPS: int

class Pass:
    bad: int
    low: int
    high: int
    def __init__(self, n: int, whole: bool, keep_rows: bool) -> None: ...
    def add(
        self,
        ids: Any,
        parent_ids: Any,
        parent_valid: Any,
        start: Any,
        end: Any,
        end_valid: Any,
        closed: Any,
        span: Any,
        codes: Any,
        groups: int,
        /,
    ) -> int: ...
    def finish(self) -> int: ...
    def result(self) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes, int, int, int]: ...
    def grouped(self, durations: Any, self_times: Any, /) -> None: ...

def order_stats(
    values: Any, at: Sequence[float], between: tuple[float, float] | None, /
) -> tuple[float, ...]: ...
