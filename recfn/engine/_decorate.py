"""Decorator wrappers for ``record_function``: Python closures, or for plain functions in compiled
builds the C ``RangeCall``; ``functools.wraps`` works on both.

The engine hands in its ``begin_range``/``end_range``, so this module does not import the engine
(which imports it to implement ``record_function.__call__``).
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Any, Optional

from recfn.engine.scope import SCOPE_USER
from recfn.errors import RecfnTypeError

Begin = Callable[[str, Optional[str], int], Any]
End = Callable[[Any], None]


def decorate(
    fn: Callable[..., Any],
    name: str,
    args: Optional[str],
    begin: Begin,
    end: End,
    native: Optional[Callable[..., Callable[..., Any]]] = None,
) -> Callable[..., Any]:
    """Wrap ``fn`` (plain or async) so every call is a USER_SCOPE range called ``name``.

    ``native`` (``recfn.native._ccall.RangeCall`` in compiled builds) wraps a plain function without a
    Python frame: the same calls, metadata, method binding and pickling as ``wrapper`` below
    (other callables, which may lack a name to take, keep ``wrapper``).
    """
    if not callable(fn):
        raise RecfnTypeError(
            f"record_function can only decorate callables, got {type(fn).__name__}"
        )
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*a: Any, **kw: Any) -> Any:
            rf = begin(name, args, SCOPE_USER)
            if rf is None:
                return await fn(*a, **kw)
            try:
                return await fn(*a, **kw)
            finally:
                end(rf)

        return async_wrapper

    if native is not None and isinstance(fn, types.FunctionType):
        return functools.update_wrapper(native(fn, name, args, SCOPE_USER, begin, end), fn)

    @functools.wraps(fn)
    def wrapper(*a: Any, **kw: Any) -> Any:
        rf = begin(name, args, SCOPE_USER)
        if rf is None:
            return fn(*a, **kw)
        try:
            return fn(*a, **kw)
        finally:
            end(rf)

    return wrapper
