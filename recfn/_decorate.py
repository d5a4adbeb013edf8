"""Decorator wrappers for ``record_function``: plain Python closures, so ``functools.wraps`` works."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Optional

from recfn._engine import SCOPE_USER, begin_range, end_range


def decorate(fn: Callable[..., Any], name: str, args: Optional[str]) -> Callable[..., Any]:
    """Wrap ``fn`` (plain or async) so every call is a USER_SCOPE range called ``name``."""
    if not callable(fn):
        raise TypeError(f"record_function can only decorate callables, got {type(fn).__name__}")
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*a: Any, **kw: Any) -> Any:
            rf = begin_range(name, args, SCOPE_USER)
            if rf is None:
                return await fn(*a, **kw)
            try:
                return await fn(*a, **kw)
            finally:
                end_range(rf)

        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*a: Any, **kw: Any) -> Any:
        rf = begin_range(name, args, SCOPE_USER)
        if rf is None:
            return fn(*a, **kw)
        try:
            return fn(*a, **kw)
        finally:
            end_range(rf)

    return wrapper
