"""Parents and depths from interval nesting, vectorised (used by Chrome import and the accessor).

Parents are row positions, -1 for roots. No function loops over events in Python: the loops
that remain run over tree levels or over powers of two.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from recfn.errors import RecfnValueError

INT64_MIN = np.iinfo(np.int64).min


def parents_from_nesting(
    group: np.ndarray, start: np.ndarray, end: np.ndarray, can_contain: np.ndarray
) -> np.ndarray:
    """Parent positions from interval nesting within each `group` (thread).

    Ranges are half-open ``[start, end)``: a row's parent is the innermost row of its group with
    ``can_contain`` set that starts no later, ends no earlier, and ends after the row starts.
    Open ranges should pass ``end = INT64_MAX``; marks pass ``end = start``. Among identical
    intervals the earlier row is the parent. Partially overlapping (malformed) ranges are
    resolved without error: the later one nests under the nearest row that covers its end.
    """
    n = len(start)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    order, g, need, reach = _sorted_needs(group, start, end, can_contain)
    # Rows that no earlier row of their group reaches are roots; skip their search.
    same_group = g[1:] == g[:-1]
    del g
    reached = _cummax_by_run(reach, same_group)
    has_parent = np.r_[False, same_group]
    has_parent[1:] &= reached[:-1] >= need[1:]
    del reached
    found = _previous_at_least(reach, need, np.flatnonzero(has_parent))
    parent = np.full(n, -1, dtype=np.int64)
    parent[order[has_parent]] = order[found[has_parent]]
    return parent


def nesting(
    group: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    can_contain: np.ndarray,
    native: Callable[..., tuple[bytes, bytes]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """`parents_from_nesting` and `depths` of its parents. `native` (``recfn.native._cchrome.nest``,
    compiled builds) finds both in one pass over the sorted rows, with a stack."""
    if native is None or len(start) == 0:
        parent = parents_from_nesting(group, start, end, can_contain)
        return parent, depths(parent)
    found = native(
        *(a.astype(np.int64, copy=False) for a in _sorted_needs(group, start, end, can_contain))
    )
    return np.frombuffer(found[0], np.int64), np.frombuffer(found[1], np.int64)


def _sorted_needs(
    group: np.ndarray, start: np.ndarray, end: np.ndarray, can_contain: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rows' positions in nesting order (`_nesting_order`) and, in that order, their group,
    the end a parent must reach (`need`) and the end they reach as parents (`reach`, INT64_MIN
    for rows that contain nothing). Sorted so, a row's parent is the nearest earlier row of its
    group whose reach is at least its need: every earlier row that does not contain it ended
    before it started."""
    order = _nesting_order(group, start, end, can_contain)
    s, e = start[order], end[order]
    need = np.maximum(e, s + 1)
    reach = np.where(can_contain[order] & (e > s), e, INT64_MIN)
    del s, e
    return order, group[order], need, reach


def _nesting_order(
    group: np.ndarray, start: np.ndarray, end: np.ndarray, can_contain: np.ndarray
) -> np.ndarray:
    """Positions sorted by group, start, end descending, containers first, position. Rows that
    are in that order but for their groups (as an event table sorted by start is) need only a
    stable sort by group, several times faster than sorting by all keys."""
    s0, s1, e0, e1 = start[:-1], start[1:], end[:-1], end[1:]
    c0, c1 = ~can_contain[:-1], ~can_contain[1:]
    tied = (s1 == s0) & (e1 == e0)
    if not ((s1 > s0) | ((s1 == s0) & (e1 < e0)) | (tied & (c0 <= c1))).all():
        return np.lexsort((np.arange(len(start)), ~can_contain, -end, start, group))
    if len(group) and group.min() >= 0 and group.max() < 1 << 15:
        group = group.astype(np.int16)  # sorted by radix
    return np.argsort(group, kind="stable")


def _cummax_by_run(values: np.ndarray, same_run: np.ndarray) -> np.ndarray:
    """The running maximum of `values` within each run of rows (`same_run[i]`: row i + 1 is in
    row i's run)."""
    cuts = np.flatnonzero(~same_run) + 1
    if len(cuts) > _MAX_RUNS:
        runs = np.cumsum(np.r_[0, ~same_run])
        return np.asarray(pd.Series(values).groupby(runs).cummax().to_numpy())
    out = np.empty_like(values)
    bounds = [0, *cuts.tolist(), len(values)]
    for lo, hi in zip(bounds, bounds[1:]):
        np.maximum.accumulate(values[lo:hi], out=out[lo:hi])
    return out


_MAX_RUNS = 1000
"""Groups up to which `_cummax_by_run` loops over them (cheaper than grouping)."""


def _previous_at_least(values: np.ndarray, needs: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each i in `rows` the largest j < i with ``values[j] >= needs[i]``, else -1.

    Binary lifting over a sparse table of window maxima: every row first gallops backwards in
    steps 1, 2, 4, ... until a window holds a large enough value, then halves the step to pin
    the answer down. Work is O(log distance) per row, and the answer is usually close by.
    """
    n = len(values)
    levels = [values]  # levels[k][j] = max(values[j : j + 2**k])
    low = np.arange(n, dtype=np.int64)  # invariant: values[low[i] : i] < needs[i]
    rows = rows[rows > 0]
    stopped: list[tuple[np.ndarray, int]] = []
    k = 0
    while rows.size:
        if k == len(levels):
            half = 1 << (k - 1)
            levels.append(np.maximum(levels[-1][:-half], levels[-1][half:]))
        moved = _jump(levels[k], low, rows, needs, 1 << k)
        stopped.append((rows[~moved], k - 1))
        rows = rows[moved]
        k += 1
        if rows.size and (1 << k) > n:
            stopped.append((rows, k - 1))
            break
    for k in range(len(levels) - 1, -1, -1):
        active = [r for r, top in stopped if top >= k]
        if active:
            rows = np.concatenate(active)
            _jump(levels[k], low, rows, needs, 1 << k)
    return low - 1


def _jump(
    level: np.ndarray, low: np.ndarray, rows: np.ndarray, needs: np.ndarray, step: int
) -> np.ndarray:
    """Move ``low[rows]`` back by `step` where that window stays below the need; which moved."""
    candidate = low[rows] - step
    moved = candidate >= 0
    moved[moved] = level[candidate[moved]] < needs[rows[moved]]
    low[rows[moved]] = candidate[moved]
    return np.asarray(moved, dtype=bool)


def depths(parent: np.ndarray) -> np.ndarray:
    """Number of ancestors of each row, by pointer jumping (log2 of the deepest chain steps)."""
    depth = (parent >= 0).astype(np.int64)
    up = parent.copy()
    active = np.flatnonzero(up >= 0)
    for _ in range(64):
        if active.size == 0:
            return depth
        hop = up[active]
        depth[active] += depth[hop]
        up[active] = up[hop]
        active = active[up[active] >= 0]
    raise RecfnValueError("parent_id contains a cycle")
