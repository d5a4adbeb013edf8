"""How one run changed from a baseline, per group of ranges."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from recfn.analysis.columns import group_keys
from recfn.analysis.stats.summary import summarize
from recfn.errors import RecfnTypeError
from recfn.formats.trace import Trace

COMPARED: tuple[str, ...] = ("count", "total_ns", "self_ns")
"""Summary columns that a diff compares."""
DEVICE_COMPARED: tuple[str, ...] = ("device_count", "device_total_ns", "device_self_ns")
"""GPU columns that a diff compares too when both frames have GPU time: a trace profiled
without ``cuda=True`` has no GPU time to compare with, rather than zero."""


def diff(
    current: pd.DataFrame,
    baseline: pd.DataFrame | Trace,
    *,
    by: str | Sequence[str] = "name",
    as_index: bool = True,
) -> pd.DataFrame:
    """Per group, how `current` changed from `baseline` (a frame or a `recfn.Trace`); see
    `RecfnAccessor.diff`."""
    if isinstance(baseline, Trace):
        baseline = baseline.to_pandas()
    if not isinstance(baseline, pd.DataFrame):
        raise RecfnTypeError(
            f"diff: baseline must be a recfn.Trace or its DataFrame, got {type(baseline).__name__}"
        )
    keys = group_keys(by, "diff")
    now, then = (summarize(frame, keys, as_index=False) for frame in (current, baseline))
    compared = COMPARED
    if all(DEVICE_COMPARED[0] in side.columns for side in (now, then)):
        compared += DEVICE_COMPARED
    now, then = (_plain_keys(side, keys, compared) for side in (now, then))
    merged = now.merge(then, on=keys, how="outer", suffixes=("", "_baseline"))
    result = merged[keys].copy()
    for column in compared:
        value = merged[column].fillna(0).astype(np.int64)
        base = merged[f"{column}_baseline"].fillna(0).astype(np.int64)
        change = value - base
        result[column] = value
        result[f"{column}_baseline"] = base
        result[f"{column}_change"] = change
        pct = 100.0 * change / base.replace(0, np.nan)
        result[f"{column}_change_pct"] = pct.mask((base == 0) & (value > 0), np.inf)
    result = result.sort_values(
        ["self_ns_change", "total_ns_change", *keys],
        ascending=[False, False, *[True] * len(keys)],
        kind="stable",
    ).reset_index(drop=True)
    return result.set_index(keys) if as_index else result


def _plain_keys(summary: pd.DataFrame, keys: list[str], compared: tuple[str, ...]) -> pd.DataFrame:
    """The compared columns, with categorical keys as objects so that two runs' categories
    (which differ) still merge."""
    picked = summary[[*keys, *compared]]
    categorical = [k for k in keys if isinstance(picked[k].dtype, pd.CategoricalDtype)]
    return picked.astype(dict.fromkeys(categorical, object))
