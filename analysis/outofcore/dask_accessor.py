"""``ddf.recfn`` on Dask DataFrames: the summary of a fleet computed per process, then combined.

Self time needs each range's children, which live in the same process (ids are unique per
``(host, pid)``). So the rows are grouped by process — a shuffle by process key, done by Dask,
or none at all when the frame's partitions hold whole processes already (``read_dataset``,
``summary(by_partition=True)``) — each process is summarised by the pandas code, and the
per-process partial summaries are added up. Registered with Dask's accessor API when
``dask.dataframe`` is imported (``recfn``'s import hook) or by ``register()``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from recfn.analysis.columns import group_keys
from recfn.analysis.stats.summary import PARTIAL_COLUMNS, _summarize, add_partials
from recfn.errors import RecfnTypeError, RecfnValueError

_TOTAL = "__process_self_total"
_FIRST = "__process_first_start"
_LAST = "__process_last_end"
_INT64 = np.iinfo(np.int64)


def register() -> None:
    """Register ``ddf.recfn`` on ``dask.dataframe.DataFrame`` (once)."""
    import dask.dataframe as dd
    from dask.dataframe.extensions import register_dataframe_accessor

    if not hasattr(dd.DataFrame, "recfn"):
        register_dataframe_accessor("recfn")(DaskRecfnAccessor)  # type: ignore[no-untyped-call]


def read_dataset(path: Any) -> Any:
    """A Dask DataFrame of a dataset written by ``profile(output=...)`` (or any folder, glob or
    list of trace files) with one partition per process folder, so that ``summary`` needs no
    shuffle (``by_partition=True``)."""
    import dask.dataframe as dd

    from recfn.formats.dataset import resolve

    files = resolve(path)
    groups: dict[str, list[str]] = {}
    for name in files:
        groups.setdefault(os.path.dirname(name), []).append(name)
    return dd.from_map(_read_files, [groups[folder] for folder in sorted(groups)])  # type: ignore[no-untyped-call]


def _read_files(files: Sequence[str]) -> pd.DataFrame:
    from recfn.formats.dataset import read
    from recfn.formats.schema import to_pandas

    return to_pandas(read(files))


def _partial(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The summary statistics of one process (or several whole ones), with their self-time
    total, in a form that adds up across processes."""
    lossy = [c for c in ("start_ns", "end_ns") if c in df.columns and df[c].dtype.kind == "f"]
    if lossy:
        raise RecfnTypeError(
            f"{', '.join(lossy)} read as float64, which cannot hold nanosecond timestamps "
            "exactly; read the dataset with dd.read_parquet(path, "
            "dtype_backend='numpy_nullable') or recfn.analysis.outofcore.files.dask_accessor.read_dataset"
        )
    if df.empty:
        return _empty(keys)
    found = _summarize(df, keys, "total_ns", None, False, 0)
    result = found.table
    out = result[[*keys, *PARTIAL_COLUMNS[:-1]]].copy()
    out["duration_ns"] = np.rint(result["mean_ns"] * result["count"]).astype(np.int64)
    for key in keys:
        out[key] = out[key].astype(object)
    # The frame's self-time total and the span of its ranges ride on its first row, to be
    # summed and to give the wall time (the earliest start and the latest end of all).
    out[_TOTAL] = 0
    out[_FIRST] = _INT64.max
    out[_LAST] = _INT64.min
    if len(out):
        out.loc[out.index[0], _TOTAL] = found.total
        out.loc[out.index[0], _FIRST] = found.first
        out.loc[out.index[0], _LAST] = found.first + found.wall
    return out


def _empty(keys: list[str]) -> pd.DataFrame:
    columns: dict[str, Any] = {key: pd.Series([], dtype=object) for key in keys}
    for name in PARTIAL_COLUMNS:
        columns[name] = pd.Series([], dtype=np.int64)
    for name in (_TOTAL, _FIRST, _LAST):
        columns[name] = pd.Series([], dtype=np.int64)
    return pd.DataFrame(columns)


class DaskRecfnAccessor:
    """``ddf.recfn``: fleet analyses of a Dask DataFrame of recfn events."""

    def __init__(self, frame: Any) -> None:
        self._ddf = frame

    def summary(
        self,
        by: str | Sequence[str] = "name",
        *,
        sort_by: str = "total_ns",
        top: int | None = None,
        as_index: bool = True,
        by_partition: bool = False,
    ) -> pd.DataFrame:
        """``df.recfn.summary`` of the whole frame (computed now), the same numbers as pandas.

        ``by`` must include ``name``. Rows are grouped by ``(host, pid)`` first (a shuffle by
        process key); ``by_partition=True`` skips it when every partition holds whole
        processes, as those of ``read_dataset`` do.
        """
        keys = group_keys(by, "the Dask summary")
        if "name" not in keys:
            raise RecfnValueError("the Dask summary groups by name (plus any other columns)")
        ddf = self._ddf
        meta = _empty(keys)
        if by_partition:
            partials = ddf.map_partitions(_partial, keys, meta=meta)
        else:
            process = [c for c in ("host", "pid") if c in ddf.columns]
            partials = ddf.groupby(process, observed=True).apply(_partial, keys, meta=meta)
        parts = partials.compute()
        total = int(parts[_TOTAL].sum()) if len(parts) else 0
        wall = int(parts[_LAST].max()) - int(parts[_FIRST].min()) if len(parts) else 0
        partial = parts.drop(columns=[_TOTAL, _FIRST, _LAST])
        return add_partials(partial, keys, [], total, sort_by, top, as_index, max(wall, 0))
