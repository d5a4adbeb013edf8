"""Ending a range when a future completes (the seed's ``_call_end_callbacks_on_fut``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from recfn.errors import RecfnTypeError


def chain_future(fut: Any, rf: Any) -> Any:
    """Return a future with ``fut``'s outcome that completes after ``rf`` has ended."""
    if isinstance(fut, concurrent.futures.Future):
        out: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def finish_concurrent(done: concurrent.futures.Future[Any]) -> None:
            rf._end_from_future()
            if done.cancelled():
                out.cancel()
                out.set_running_or_notify_cancel()
                return
            error = done.exception()
            if error is not None:
                out.set_exception(error)
            else:
                out.set_result(done.result())

        fut.add_done_callback(finish_concurrent)
        return out
    if asyncio.isfuture(fut):
        chained = fut.get_loop().create_future()

        def finish_asyncio(done: asyncio.Future[Any]) -> None:
            rf._end_from_future()
            if chained.done():
                return
            if done.cancelled():
                chained.cancel()
                return
            error = done.exception()
            if error is not None:
                chained.set_exception(error)
            else:
                chained.set_result(done.result())

        fut.add_done_callback(finish_asyncio)
        return chained
    raise RecfnTypeError(
        "end_on_future expects a concurrent.futures.Future or an asyncio future/task, "
        f"got {type(fut).__name__}"
    )
