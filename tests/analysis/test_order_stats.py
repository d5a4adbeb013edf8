"""The calls' order statistics (``recfn.analysis.stats.runs.call_statistics``): the native
selection (``_csummary.order_stats``) gives numpy's numbers exactly, whatever the values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recfn.analysis.stats import runs
from recfn.native import extension

native = extension("_csummary")
pytestmark = pytest.mark.skipif(native is None, reason="pure build: numpy's partition only")


@st.composite
def values(draw: st.DrawFn) -> np.ndarray:
    """Durations as captures give them (many near one value, a long tail), ties, zeros, huge
    and negative values, on both sides of the size where the native path takes a histogram."""
    n = draw(st.sampled_from([1, 2, 3, 7, 100, 2047, 2048, 5000]))
    shape = draw(st.sampled_from(["durations", "few", "equal", "huge", "signed", "two humps"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if shape == "durations":
        found = rng.lognormal(draw(st.floats(0, 20)), draw(st.floats(0.01, 3)), n)
    elif shape == "few":
        found = rng.integers(0, 4, n)
    elif shape == "equal":
        found = np.full(n, draw(st.integers(0, 2**62)))
    elif shape == "huge":
        found = rng.integers(0, 2**62, n)
    elif shape == "signed":
        found = rng.integers(-(2**40), 2**40, n)
    else:
        found = np.concatenate(
            [rng.integers(0, 300, n // 2), rng.integers(10**9, 10**9 + 5, n - n // 2)]
        )
    return np.asarray(found, dtype=np.int64)


@settings(max_examples=150, deadline=None)
@given(durations=values(), self_times=values())
def test_the_native_order_statistics_are_numpys(
    durations: np.ndarray, self_times: np.ndarray
) -> None:
    quantiles, low_mean, self_median = runs.call_statistics(durations.copy(), self_times.copy())
    assert (
        quantiles.tolist()
        == runs.unsorted_quantiles(durations.copy(), runs.CALL_QUANTILES).tolist()
    )
    assert low_mean == runs.trimmed_mean(durations.copy(), runs.LOW_TRIM)
    assert self_median == float(runs.unsorted_quantiles(self_times.copy(), (0.5,))[0])
    ordered = np.sort(durations)
    assert quantiles.tolist() == runs.sorted_quantiles(ordered, runs.CALL_QUANTILES).tolist()
    assert low_mean == runs.trimmed_mean(ordered, runs.LOW_TRIM, is_sorted=True)


def test_order_stats_refuses_what_it_cannot_select_in() -> None:
    assert native is not None
    with pytest.raises(ValueError, match="no values"):
        native.order_stats(np.zeros(0, dtype=np.int64), (0.5,), None)
    with pytest.raises(ValueError, match="writable int64"):
        native.order_stats(np.zeros(3, dtype=np.float64), (0.5,), None)
    frozen = np.zeros(3, dtype=np.int64)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        native.order_stats(frozen, (0.5,), None)
    with pytest.raises(ValueError, match="between 0 and 1"):
        native.order_stats(np.zeros(3, dtype=np.int64), (1.5,), None)
    with pytest.raises(ValueError, match="between 0 and 1"):
        native.order_stats(np.zeros(3, dtype=np.int64), (0.5,), (0.6, 0.2))
