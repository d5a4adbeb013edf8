"""recfn: PyTorch's RecordFunction for any Python program.

Named ranges (``with recfn.record_function("step"):``), start/end callbacks filtered by scope and
sampled, guards, context that follows threads and asyncio tasks, and a profiler that records into
columnar buffers and hands back a ``recfn.Trace``. This module is the package's facade: the
public names of the subpackages (``engine``, ``capture``, ``formats``, ``gpu``,
``instrumentation``, ``native``), and the one place that reaches the layers above the core
(``recfn.analysis``, ``recfn.notebook_ext``): it fills ``recfn.formats.hooks`` (rich reprs, the
``df.recfn`` accessor) with functions that import them when called. ``recfn.build_info()`` says
what is compiled and native here. Importing recfn imports no pandas, pyarrow, matplotlib or
IPython; the ``df.recfn`` accessor is registered as soon as pandas is imported (or at once, when
it already is).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from recfn import errors
from recfn._version import __version__
from recfn.capture import (
    CapturedTraceback,
    ProfilerConfig,
    RecordProfile,
    disable_profiler,
    enable_profiler,
    gather_traceback,
    mark,
    profile,
    register_flops,
    report_memory_usage,
    set_default_node_id,
    symbolize_tracebacks,
    unregister_flops,
)
from recfn.engine import (
    DisableRecordFunctionGuard,
    PropagatingExecutor,
    RecordFunction,
    RecordFunctionCallback,
    RecordFunctionGuard,
    RecordScope,
    add_global_callback,
    add_thread_local_callback,
    clear_callbacks,
    clear_global_callbacks,
    clear_thread_local_callbacks,
    current_range,
    current_thread_id,
    disable_callback,
    enable_record_function,
    has_callbacks,
    has_global_callbacks,
    has_thread_local_callbacks,
    is_record_function_enabled,
    propagate,
    record_function,
    record_function_fast,
    reenable_callback,
    remove_callback,
    set_record_function_seed_for_testing,
)
from recfn.errors import RecfnError, RecfnValueError, TraceFormatError
from recfn.formats import hooks as _hooks
from recfn.gpu import emit_nvtx
from recfn.native import BuildInfo, build_info
from recfn.native import manifest as _native_manifest
from recfn.native.manifest import COMPILED_MODULES

# Automatic instrumentation, loaded on first use to keep `import recfn` fast.
_LAZY = {
    "InstrumentHandle": "recfn.instrumentation",
    "add_to_skip_list": "recfn.instrumentation",
    "instrument": "recfn.instrumentation",
    "remove_from_skip_list": "recfn.instrumentation",
    "skip_list": "recfn.instrumentation",
    "ModuleHooks": "recfn.instrumentation",
    "instrument_module": "recfn.instrumentation",
    "Trace": "recfn.formats.trace",
    "apply_clock_offsets": "recfn.formats.clocks",
    "estimate_clock_offsets": "recfn.formats.clocks",
    "merge": "recfn.formats.trace",
    # Run comparison lives in the analysis layer (pandas): imported on first use.
    "compare": "recfn.analysis.runsets",
    "compare_steps": "recfn.analysis.runsets",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'recfn' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def load(path: Any, as_pandas: bool = False, *, clock_offsets: Any = None, lazy: Any = None) -> Any:
    """A ``recfn.Trace`` of a trace file: recfn Parquet, any Parquet with the event table's
    columns, or Chrome JSON (``.json``/``.json.gz``), told apart by content; of a folder, glob
    or list of them, read lazily. ``as_pandas=True`` returns ``trace.to_pandas()`` instead;
    ``clock_offsets`` (``{host: ns}`` or a mark's name) lines up the hosts' clocks; ``lazy``
    reads a recfn Parquet file when first used (default: files of 1M events or more), so that
    ``summary()`` runs out of core (see ``recfn.formats.trace.load``)."""
    from recfn.formats.trace import load as load_trace

    return load_trace(path, as_pandas=as_pandas, clock_offsets=clock_offsets, lazy=lazy)


def session() -> Any:
    """The notebook session: per-cell traces recorded by ``%%record_function``."""
    return importlib.import_module("recfn.notebook_ext").session()


# C extensions built with the compiled modules (recfn.native; what each does: recfn.build_info()).
NATIVE_MODULES = tuple(f"recfn.native.{name}" for name in _native_manifest.C_EXTENSIONS)

COMPILED: bool = build_info().compiled
"""True when the mypyc-compiled core modules and the C extensions are loaded (not .py sources)."""


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext recfn``: register the ``%%record_function`` magics."""
    importlib.import_module("recfn.notebook_ext").load_ipython_extension(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    importlib.import_module("recfn.notebook_ext").unload_ipython_extension(ipython)


# -- hooks: the layers above, reached only when called ---------------------------------------


def _trace_header(trace: Any) -> str:
    text: str = importlib.import_module("recfn.notebook_ext.display").header_text(trace)
    return text


def _trace_text(trace: Any) -> str:
    text: str = importlib.import_module("recfn.notebook_ext.display").trace_text(trace)
    return text


def _trace_html(trace: Any) -> str:
    text: str = importlib.import_module("recfn.notebook_ext.display").trace_html(trace)
    return text


def _files_summary(files: Any, footers: Any, **options: Any) -> Any:
    """A trace of files' summary out of core when it can compute it, else None (pandas)."""
    outofcore = importlib.import_module("recfn.analysis.outofcore.files")
    if not outofcore.supports(files, options):
        return None
    if len(files) == 1 and outofcore.holds_any(files[0], footers, outofcore.IN_MEMORY_ONLY):
        return None  # a file's memory or GPU columns: the in-memory summary has them
    return outofcore.summarize_files(files, footers=footers, **options)


def _table_summary(table: Any, **options: Any) -> Any:
    """A trace in memory's summary in one pass per process when it can compute it (grouped by
    name, no memory or GPU columns, ids that check out), else None (pandas): the same numbers."""
    outofcore = importlib.import_module("recfn.analysis.outofcore.files")
    if not outofcore.supports_options(options) or table.num_rows == 0:
        return None
    try:
        summary = outofcore.summarize_table(table, **options)
    except (RecfnValueError, TraceFormatError):  # pandas computes it, or says what is wrong
        return None
    return summary if len(summary) else None


def _compare(baseline: Any, candidate: Any, **options: Any) -> Any:
    return importlib.import_module("recfn.analysis.runsets").compare(baseline, candidate, **options)


def _comparison_html(comparison: Any) -> str:
    text: str = importlib.import_module("recfn.notebook_ext.compare_view").comparison_html(
        comparison
    )
    return text


class _LazyAccessor:
    """``df.recfn`` until first used: then ``recfn.analysis`` (and matplotlib) is imported."""

    def __new__(cls, frame: Any) -> Any:
        return importlib.import_module("recfn.analysis.accessor").RecfnAccessor(frame)


def _register_accessor() -> None:
    """Register ``df.recfn`` (once; imports pandas)."""
    import pandas as pd

    try:
        frame, register = pd.DataFrame, pd.api.extensions.register_dataframe_accessor
    except AttributeError:  # pandas is still being imported: its import hook registers later
        return
    if not hasattr(frame, "recfn"):
        register("recfn")(_LazyAccessor)


def _register_dask_accessor() -> None:
    """Register ``ddf.recfn`` on Dask DataFrames (imports recfn.analysis)."""
    importlib.import_module("recfn.analysis.outofcore.dask_accessor").register()


class _PandasWatcher:
    """A one-shot ``sys.meta_path`` entry: when pandas (``module``) is imported, register
    ``df.recfn`` (``register``) right after the module's own code has run."""

    module = "pandas"
    register = staticmethod(_register_accessor)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.module:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(self.module)
        loader = None if spec is None else spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            try:
                run(module)
            finally:
                del loader.exec_module  # back to the class's method
            self.register()

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_hooks.header_renderer = _trace_header
_hooks.text_renderer = _trace_text
_hooks.html_renderer = _trace_html
_hooks.files_summary = _files_summary
_hooks.table_summary = _table_summary
_hooks.compare = _compare
_hooks.comparison_html_renderer = _comparison_html
_hooks.on_pandas = _register_accessor


class _DaskWatcher(_PandasWatcher):
    """The same for ``ddf.recfn`` when ``dask.dataframe`` is imported."""

    module = "dask.dataframe"
    register = staticmethod(_register_dask_accessor)


for _watcher in (_PandasWatcher, _DaskWatcher):
    if _watcher.module in sys.modules:
        _watcher.register()
    elif not any(type(finder) is _watcher for finder in sys.meta_path):
        sys.meta_path.insert(0, _watcher())
del _watcher


__all__ = [
    "COMPILED",
    "COMPILED_MODULES",
    "NATIVE_MODULES",
    "BuildInfo",
    "CapturedTraceback",
    "DisableRecordFunctionGuard",
    "InstrumentHandle",
    "ModuleHooks",
    "ProfilerConfig",
    "PropagatingExecutor",
    "RecfnError",
    "RecordFunction",
    "RecordFunctionCallback",
    "RecordFunctionGuard",
    "RecordProfile",
    "RecordScope",
    "Trace",
    "TraceFormatError",
    "__version__",
    "add_global_callback",
    "add_thread_local_callback",
    "add_to_skip_list",
    "apply_clock_offsets",
    "build_info",
    "clear_callbacks",
    "clear_global_callbacks",
    "clear_thread_local_callbacks",
    "compare",
    "compare_steps",
    "current_range",
    "current_thread_id",
    "disable_callback",
    "disable_profiler",
    "emit_nvtx",
    "enable_profiler",
    "enable_record_function",
    "errors",
    "estimate_clock_offsets",
    "gather_traceback",
    "has_callbacks",
    "has_global_callbacks",
    "has_thread_local_callbacks",
    "instrument",
    "instrument_module",
    "is_record_function_enabled",
    "load",
    "mark",
    "merge",
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
    "symbolize_tracebacks",
    "unregister_flops",
]
