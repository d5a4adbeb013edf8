"""recfn: PyTorch's RecordFunction for any Python program.

Named ranges (``with recfn.record_function("step"):``), start/end callbacks filtered by scope and
sampled, guards, context that follows threads and asyncio tasks, and a profiler that records into
columnar buffers and hands back one ``pyarrow.Table``. This module stays small and uncompiled; the
engine (``recfn._engine``, ``recfn._registry``), the capture buffers (``recfn._recorder``) and the
call tracer (``recfn._tracer``) are compiled with mypyc.
Importing recfn imports no pandas, matplotlib or IPython.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from recfn._context import PropagatingExecutor, propagate
from recfn._engine import (
    RecordFunction,
    RecordFunctionCallback,
    current_range,
    current_thread_id,
    record_function,
    record_function_fast,
)
from recfn._nvtx import emit_nvtx
from recfn._registry import (
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
from recfn.errors import TraceFormatError
from recfn.flops import register_flops, unregister_flops
from recfn.profiler import (
    ProfilerConfig,
    RecordProfile,
    disable_profiler,
    enable_profiler,
    mark,
    profile,
    report_memory_usage,
    set_default_node_id,
)
from recfn.scope import RecordScope

# Automatic instrumentation, loaded on first use to keep `import recfn` fast.
_LAZY = {
    "InstrumentHandle": "recfn._instrument",
    "add_to_skip_list": "recfn._instrument",
    "instrument": "recfn._instrument",
    "remove_from_skip_list": "recfn._instrument",
    "skip_list": "recfn._instrument",
    "ModuleHooks": "recfn.torch_modules",
    "instrument_module": "recfn.torch_modules",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'recfn' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def load(path: Any, as_pandas: bool = False) -> Any:
    """Read a trace saved by ``profile.save`` as a ``pyarrow.Table`` (or a DataFrame)."""
    from recfn.io import load as load_trace

    return load_trace(path, as_pandas=as_pandas)


def session() -> Any:
    """The notebook session: per-cell traces recorded by ``%%record_function``."""
    import importlib

    return importlib.import_module("recfn.notebook_ext").session()


COMPILED_MODULES = ("recfn._engine", "recfn._registry", "recfn._recorder", "recfn._tracer")


def _is_extension(name: str) -> bool:
    import importlib.util

    spec = importlib.util.find_spec(name)  # what `import` loads, without importing it
    return spec is not None and str(spec.origin).endswith((".so", ".pyd"))


COMPILED: bool = all(_is_extension(name) for name in COMPILED_MODULES)
"""True when the mypyc-compiled core modules are loaded (not their .py sources)."""


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext recfn``: register the ``%%record_function`` magics."""
    import importlib

    importlib.import_module("recfn.notebook_ext").load_ipython_extension(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    import importlib

    importlib.import_module("recfn.notebook_ext").unload_ipython_extension(ipython)


__all__ = [
    "COMPILED",
    "DisableRecordFunctionGuard",
    "InstrumentHandle",
    "ModuleHooks",
    "ProfilerConfig",
    "PropagatingExecutor",
    "RecordFunction",
    "RecordFunctionCallback",
    "RecordFunctionGuard",
    "RecordProfile",
    "RecordScope",
    "TraceFormatError",
    "add_global_callback",
    "add_thread_local_callback",
    "add_to_skip_list",
    "clear_callbacks",
    "clear_global_callbacks",
    "clear_thread_local_callbacks",
    "current_range",
    "current_thread_id",
    "disable_callback",
    "disable_profiler",
    "emit_nvtx",
    "enable_profiler",
    "enable_record_function",
    "has_callbacks",
    "has_global_callbacks",
    "has_thread_local_callbacks",
    "instrument",
    "instrument_module",
    "is_record_function_enabled",
    "load",
    "mark",
    "profile",
    "propagate",
    "record_function",
    "record_function_fast",
    "reenable_callback",
    "register_flops",
    "remove_callback",
    "remove_from_skip_list",
    "report_memory_usage",
    "session",
    "set_default_node_id",
    "set_record_function_seed_for_testing",
    "skip_list",
    "unregister_flops",
]
