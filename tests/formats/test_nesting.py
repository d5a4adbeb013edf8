"""The nesting order recfn.formats.nesting sorts rows into (a private helper, tested here beside
its package)."""

from __future__ import annotations

import numpy as np

from recfn.formats.nesting import _nesting_order


def test_the_nesting_order_is_the_full_sort_whether_or_not_rows_come_in_start_order() -> None:
    """Rows already sorted by start (then end descending, containers first) are only sorted
    by group; the order must be the one sorting by every key gives."""
    rng = np.random.default_rng(1)
    for trial in range(200):
        n = int(rng.integers(1, 80))
        start = rng.integers(-5, 20, n)
        end = start + rng.integers(0, 6, n)
        container = rng.random(n) < 0.7
        group = rng.integers(-1 if trial % 2 else 0, 4, n) * (1 if trial % 3 else 40_000)
        if trial % 4:
            by_start = np.lexsort((~container, -end, start))
            start, end, container, group = (a[by_start] for a in (start, end, container, group))
        expected = np.lexsort((np.arange(n), ~container, -end, start, group))
        assert np.array_equal(_nesting_order(group, start, end, container), expected)
