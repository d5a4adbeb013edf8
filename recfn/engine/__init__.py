"""Ranges and callbacks: ``record_function``, ``RecordFunction``, the callback registry, scopes,
guards, and the context that follows threads and asyncio tasks.

``ranges`` (the ranges and callback selection) and ``registry`` (adding and removing callbacks,
the enabled flag, guards) are compiled with mypyc; the capture and instrumentation subpackages
call into them directly. The names below are the ones the ``recfn`` facade re-exports.
"""

from __future__ import annotations

from recfn.engine._context import PropagatingExecutor, propagate
from recfn.engine.ranges import (
    RecordFunction,
    RecordFunctionCallback,
    current_range,
    current_thread_id,
    record_function,
    record_function_fast,
)
from recfn.engine.registry import (
    DisableRecordFunctionGuard,
    RecordFunctionGuard,
    add_global_callback,
    add_thread_local_callback,
    clear_callbacks,
    clear_global_callbacks,
    clear_thread_local_callbacks,
    disable_callback,
    enable_record_function,
    has_callbacks,
    has_global_callbacks,
    has_thread_local_callbacks,
    is_record_function_enabled,
    reenable_callback,
    remove_callback,
    set_record_function_seed_for_testing,
)
from recfn.engine.scope import RecordScope

__all__ = [
    "DisableRecordFunctionGuard",
    "PropagatingExecutor",
    "RecordFunction",
    "RecordFunctionCallback",
    "RecordFunctionGuard",
    "RecordScope",
    "add_global_callback",
    "add_thread_local_callback",
    "clear_callbacks",
    "clear_global_callbacks",
    "clear_thread_local_callbacks",
    "current_range",
    "current_thread_id",
    "disable_callback",
    "enable_record_function",
    "has_callbacks",
    "has_global_callbacks",
    "has_thread_local_callbacks",
    "is_record_function_enabled",
    "propagate",
    "record_function",
    "record_function_fast",
    "reenable_callback",
    "remove_callback",
    "set_record_function_seed_for_testing",
]
