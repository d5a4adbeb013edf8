"""The summary pane's table: per name, calls, self, total and mean time, of the whole trace or
of a time window, answered from the arrays of a `TimelineIndex` (no bulk data leaves the kernel).

The whole trace's rows follow ``df.recfn.summary()``'s rules (docs/analysis.md): closed ranges
only; a name's total counts its outermost ranges (recursion counted once); self time is the
duration less what the direct children cover. A window ``[t0, t1)`` clips every range to it: a
range's time in the window, its children's time in the window taken out for self time, calls
are the ranges overlapping the window. ``total_pct`` is the share of the wall time (the trace's
span, or the window's length) a name's total covers.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from recfn.analysis.stats.tree import outermost, self_durations
from recfn.errors import RecfnValueError
from recfn.notebook_ext.widget.names import location

if TYPE_CHECKING:
    from recfn.notebook_ext.widget.lod import TimelineIndex

MAX_ROWS = 100
"""Rows a summary response holds at most (the first by the sort column)."""
SORT_KEYS = ("name", "calls", "self", "total", "mean", "location")
"""Columns a summary can be sorted by."""


_TABLES: weakref.WeakKeyDictionary[TimelineIndex, SummaryTable] = weakref.WeakKeyDictionary()


def summary_table(index: TimelineIndex) -> SummaryTable:
    """The `SummaryTable` of ``index``, built once (the widget's pane and the HTML stand-in
    share it)."""
    table = _TABLES.get(index)
    if table is None:
        table = _TABLES[index] = SummaryTable(index)
    return table


class SummaryError(RecfnValueError):
    """A summary request with bad arguments; the message names the argument."""


class SummaryTable:
    """Per-name statistics of the ranges of ``index`` (its arrays, not a copy), for the whole
    trace (computed once) or any time window."""

    def __init__(self, index: TimelineIndex) -> None:
        self.index = index
        closed = index.is_range & index.has_end
        self._rows = np.flatnonzero(closed)
        self._start = index.start[self._rows]
        self._end = index.end[self._rows]
        self._name = index.name_codes[self._rows]
        # Parents among the closed ranges, as positions into `_rows` (-1: a root here).
        position = np.full(closed.size, -1, dtype=np.int64)
        position[self._rows] = np.arange(self._rows.size)
        up = index.parent[self._rows]
        self._parent = np.where(up >= 0, position[np.maximum(up, 0)], -1)
        if bool(closed.sum() == index.is_range.sum()):  # no open range: the index's self times
            self._self = index.self_ns[self._rows]
        else:
            self._self = self_durations(
                self._parent, self._start, self._end, np.ones(self._rows.size, dtype=bool)
            )
        self._counted = outermost(self._parent, self._name)
        # Kept in start order, so that a window's ranges are one slice of every array.
        order = np.argsort(self._start, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        parent = self._parent[order]
        self._parent = np.where(parent >= 0, rank[np.maximum(parent, 0)], -1)
        for name in ("_rows", "_start", "_end", "_name", "_self", "_counted"):
            setattr(self, name, getattr(self, name)[order])
        self._longest = int((self._end - self._start).max(initial=0))
        self._locations: dict[int, str] = {}
        self._whole: Optional[dict[str, np.ndarray]] = None

    def query(
        self,
        t0: Optional[float] = None,
        t1: Optional[float] = None,
        *,
        sort: str = "total",
        descending: bool = True,
        top: int = MAX_ROWS,
        focus: Optional[int] = None,
    ) -> dict[str, Any]:
        """The table of the whole trace (``t0``, ``t1`` None) or of ``[t0, t1)`` (ns from the
        index's origin), sorted by ``sort`` (`SORT_KEYS`), its first ``top`` rows (at most
        `MAX_ROWS`), plus name id ``focus`` wherever it sorts (the row a view selected).

        Returns ``rows`` (columns ``name`` (ids), ``calls``, ``self``, ``total``, ``mean``,
        ``total_pct``, ``location``; times in integer ns), ``groups`` (names in the window),
        ``wall`` (the ns that ``total_pct`` divides by), the window, the sort, and the names
        used (`TimelineIndex.names_of`).
        """
        if sort not in SORT_KEYS:
            raise SummaryError(f"sort must be one of {', '.join(SORT_KEYS)}, got {sort!r}")
        if not (isinstance(top, int) and 1 <= top <= MAX_ROWS):
            raise SummaryError(f"top must be an int in 1..{MAX_ROWS}, got {top!r}")
        whole = t0 is None and t1 is None
        if whole:
            stats = self._whole_trace()
            wall = float(self.index.span_ns)
        else:
            lo, hi = _window(t0, t1)
            stats = self._window(lo, hi)
            wall = hi - lo
        present = np.flatnonzero(stats["calls"] > 0)
        order = self._order(present, stats, sort, descending)
        shown = order[:top].tolist()
        if focus is not None and focus in order.tolist() and focus not in shown:
            shown.append(int(focus))
        ids = np.array(shown, dtype=np.int64)
        calls = stats["calls"][ids]
        return {
            "t0": None if whole else float(lo),
            "t1": None if whole else float(hi),
            "sort": sort,
            "descending": bool(descending),
            "groups": int(present.size),
            "wall": wall,
            "rows": {
                "name": ids.tolist(),
                "calls": calls.tolist(),
                "self": stats["self"][ids].tolist(),
                "total": stats["total"][ids].tolist(),
                "mean": np.rint(stats["time"][ids] / np.maximum(calls, 1))
                .astype(np.int64)
                .tolist(),
                "total_pct": (100.0 * stats["total"][ids] / max(wall, 1.0)).round(2).tolist(),
                "location": [self.location(i) for i in shown],
            },
            **self.index.names_of(shown),
        }

    def location(self, name_id: int) -> str:
        """``file:line`` of a name (`names.location`), looked up once per name and table."""
        found = self._locations.get(name_id)
        if found is None:
            found = self._locations[name_id] = location(self.index.names[name_id])
        return found

    def _order(
        self, present: np.ndarray, stats: dict[str, np.ndarray], sort: str, descending: bool
    ) -> np.ndarray:
        """``present`` (name ids) in table order: by ``sort``, ties by name."""
        names = np.array(self.index.names, dtype=object)[present] if present.size else present
        by_name = np.argsort(names, kind="stable") if present.size else present
        present = present[by_name]
        if sort == "name":
            keys = np.arange(present.size)
        elif sort == "location":
            locations = np.array([self.location(int(i)) for i in present], dtype=object)
            keys = np.argsort(np.argsort(locations, kind="stable"), kind="stable")
        else:
            column = "time" if sort == "mean" else sort
            values = stats[column][present].astype(np.float64)
            if sort == "mean":
                values = values / np.maximum(stats["calls"][present], 1)
            keys = values
        order = np.argsort(-keys if descending else keys, kind="stable")
        return present[order]

    def _whole_trace(self) -> dict[str, np.ndarray]:
        if self._whole is None:
            duration = (self._end - self._start).astype(np.float64)
            self._whole = self._sums(duration, self._self.astype(np.float64), self._counted)
        return self._whole

    def _window(self, lo: float, hi: float) -> dict[str, np.ndarray]:
        if lo <= 0 and hi >= self.index.span_ns:  # the whole trace: nothing is clipped
            return self._whole_trace()
        # Candidates by start (no range is longer than the longest), then those overlapping.
        first = int(np.searchsorted(self._start, lo - self._longest, side="left"))
        last = int(np.searchsorted(self._start, hi, side="left"))
        begin, finish = self._start[first:last], self._end[first:last]
        keep = (finish > lo) | ((begin == finish) & (begin >= lo))
        picked = np.flatnonzero(keep) + first
        begin, finish = begin[keep], finish[keep]
        clipped = (np.minimum(finish, hi) - np.maximum(begin, lo)).astype(np.float64)
        # Self time in the window: the range's time there less its children's time there
        # (a child overlapping the window starts in [first, last) too).
        parent = self._parent[picked] - first
        child = parent >= 0
        children = np.bincount(parent[child], weights=clipped[child], minlength=last - first)
        own = np.maximum(clipped - children[picked - first], 0.0)
        return self._sums(clipped, own, self._counted[picked], picked)

    def _sums(
        self,
        duration: np.ndarray,
        own: np.ndarray,
        counted: np.ndarray,
        picked: Optional[np.ndarray] = None,
    ) -> dict[str, np.ndarray]:
        """Per name id: calls, time (all calls), self and total (outermost calls) of the ranges
        ``picked`` (positions; all of them when None), whose values the arrays hold."""
        size = len(self.index.names) + 1
        code = (self._name if picked is None else self._name[picked]) + 1  # null names: bin 0

        def per_name(values: np.ndarray) -> np.ndarray:
            return np.rint(np.bincount(code, weights=values, minlength=size)[1:]).astype(np.int64)

        return {
            "calls": np.bincount(code, minlength=size)[1:].astype(np.int64),
            "time": per_name(duration),
            "self": per_name(own),
            "total": per_name(np.where(counted, duration, 0.0)),
        }


def _window(t0: Any, t1: Any) -> tuple[float, float]:
    try:
        lo, hi = float(t0), float(t1)
    except (TypeError, ValueError):
        raise SummaryError(f"the window needs numbers t0 < t1, got t0={t0!r}, t1={t1!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise SummaryError(f"the window needs finite t0 < t1, got t0={t0!r}, t1={t1!r}")
    return lo, hi
