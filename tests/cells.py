"""Comparing the cells of list columns in pandas (numpy arrays, None, scalars), for tests."""

from __future__ import annotations

from typing import Any

import numpy as np


def same(a: Any, b: Any) -> bool:
    """`a` and `b` are the same cell value: None, or arrays of one dtype holding the same
    values (NaN equal to NaN), or equal scalars of one type."""
    if a is None or b is None:
        return a is b
    if isinstance(a, np.ndarray):
        if not isinstance(b, np.ndarray) or a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype == object:
            return all(same(x, y) for x, y in zip(a, b))
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    return type(a) is type(b) and bool(a == b)
