"""Reading event-table columns of a DataFrame as numpy arrays, whatever dtypes the frame has.

Frames come from ``to_pandas()`` (category + ``Int64``), ``pd.read_parquet`` (nullable ints as
``float64`` with NaN) and hand-built code (plain ``int64``, ``str``); these helpers hide the
differences so that the code using them works on plain numpy arrays.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, Union

import numpy as np
import pandas as pd
import pyarrow as pa

from recfn.errors import MissingColumnsError

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


class Columned(Protocol):
    """Anything that lists its column names as ``columns`` (a DataFrame; the analysis'
    ``EventColumns``)."""

    @property
    def columns(self) -> Any: ...


def require(
    df: Union[pd.DataFrame, pa.Table, Columned], columns: Iterable[str], operation: str
) -> None:
    """Raise `MissingColumnsError` naming every column of `columns` that `df` (a DataFrame, a
    ``pyarrow.Table`` or the analysis' ``EventColumns``) lacks."""
    present = df.column_names if isinstance(df, pa.Table) else list(df.columns)
    missing = [c for c in columns if c not in present]
    if missing:
        raise MissingColumnsError(
            f"{operation} needs the recfn event-table column(s) {', '.join(map(repr, missing))}; "
            f"the frame has {', '.join(map(str, present)) or 'no columns'} (see docs/schema.md)"
        )


def ints(series: pd.Series, null: int) -> np.ndarray:
    """`series` as int64 numpy, with nulls (pd.NA or NaN) replaced by `null`."""
    if _plain_ints(series):  # no nulls to look for: pandas' na_value pass is most of the cost
        return np.array(series.to_numpy(), dtype=np.int64)
    return np.asarray(series.to_numpy(dtype=np.int64, na_value=null), dtype=np.int64)


def nulls(series: pd.Series) -> np.ndarray:
    """Boolean numpy mask (writable) of the null entries of `series`."""
    if _plain_ints(series):
        return np.zeros(len(series), dtype=bool)
    return np.array(series.array.isna(), dtype=bool)


def equals(series: pd.Series, value: object) -> np.ndarray:
    """Boolean numpy mask (writable) of ``series == value``; null compares unequal."""
    values = series.array
    if isinstance(values, pd.Categorical):  # one code compared, not every value
        try:
            code = values.categories.get_loc(value)
        except (KeyError, TypeError):
            return np.zeros(len(values), dtype=bool)
        if isinstance(code, int | np.integer):
            return np.asarray(values.codes == code)
    return np.array((series == value).to_numpy(dtype=bool, na_value=False))


def _plain_ints(series: pd.Series) -> bool:
    """Whether `series` holds numpy integers or booleans (which cannot be null)."""
    dtype = series.dtype
    return isinstance(dtype, np.dtype) and dtype.kind in "iub"
