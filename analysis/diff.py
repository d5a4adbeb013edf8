"""Per-name comparison of two runs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .summary import summarize

COMPARED = ("count", "total_ns", "self_ns")


def diff(new: pd.DataFrame, base: pd.DataFrame) -> pd.DataFrame:
    """Count, total and self time per name in `base` and `new`, their change and ratio.

    Change is ``new - base``; ratio ``new / base`` (inf for names only in `new`, 0 for names only
    in `base`). Rows are sorted by the largest self-time regression first: self time points at
    the name that got slower, while totals also grow for all its callers.
    """
    before, after = (
        summarize(frame)[["name", *COMPARED]].astype({"name": str}) for frame in (base, new)
    )
    merged = before.merge(after, on="name", how="outer", suffixes=("_base", "_new"))
    result = pd.DataFrame({"name": merged["name"]})
    for column in COMPARED:
        stem, unit = column.removesuffix("_ns"), "_ns" if column.endswith("_ns") else ""
        old = merged[f"{column}_base"].fillna(0).astype(np.int64)
        now = merged[f"{column}_new"].fillna(0).astype(np.int64)
        result[f"{column}_base"] = old
        result[f"{column}_new"] = now
        result[f"{stem}_change{unit}"] = now - old
        result[f"{stem}_ratio"] = (now / old.replace(0, np.nan)).mask(
            (old == 0) & (now > 0), np.inf
        )
    return result.sort_values(
        ["self_change_ns", "total_change_ns", "name"], ascending=[False, False, True], kind="stable"
    ).reset_index(drop=True)
