"""Types of recfn.native._ccall, the call protocol of the compiled range classes (``recfn/native/_ccall.c``)."""

from collections.abc import Callable
from typing import Any

class RangeCall:
    def __init__(
        self,
        fn: Callable[..., Any],
        name: str,
        args: str | None,
        scope: int,
        begin: Callable[[str, str | None, int], Any],
        end: Callable[[Any], None],
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

def install_constructor(cls: type, method: str, min_args: int, max_args: int, /) -> bool: ...
def install_bound_free_list(cls: type, method: str, /) -> bool: ...

MYPYC_VERSION: str
