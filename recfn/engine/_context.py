"""Carrying recfn's context (thread-local callbacks, enabled flag) into worker threads, by value."""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from recfn.errors import RecfnTypeError

T = TypeVar("T")


def propagate(fn: Callable[..., T]) -> Callable[..., T]:
    """Wrap ``fn`` so it runs in a copy of the caller's context, on whichever thread calls it.

    Thread-local callbacks and the enabled flag captured now apply inside the worker, by value:
    each call gets its own copy, so the wrapper can run on several threads at once, and what the
    call changes (adding, removing, clearing, disabling callbacks, the enabled flag) stays in its
    copy and never reaches the caller's context.
    """
    if not callable(fn):
        raise RecfnTypeError(f"propagate expects a callable, got {type(fn).__name__}")
    captured = contextvars.copy_context()

    @functools.wraps(fn)
    def run_in_context(*args: Any, **kwargs: Any) -> T:
        return captured.copy().run(fn, *args, **kwargs)

    return run_in_context


class PropagatingExecutor(concurrent.futures.Executor):
    """An executor wrapper whose tasks run in the submitting context (see ``propagate``)."""

    def __init__(self, executor: concurrent.futures.Executor) -> None:
        if not isinstance(executor, concurrent.futures.Executor):
            raise RecfnTypeError(
                f"PropagatingExecutor wraps an Executor, got {type(executor).__name__}"
            )
        self._executor = executor

    def submit(
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[T]:
        context = contextvars.copy_context()
        return self._executor.submit(context.run, fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._executor.shutdown(wait=wait, cancel_futures=cancel_futures)
