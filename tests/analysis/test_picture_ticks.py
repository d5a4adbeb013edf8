"""The picture's ticks are where matplotlib's MaxNLocator puts them."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.ticker import MaxNLocator

from recfn.analysis.plots.ticks import STEPS, tick_values

BOUND = st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False)


@settings(max_examples=500, deadline=None)
@given(BOUND, st.floats(0, 1e9, allow_nan=False) | st.floats(0, 1e-6), st.integers(2, 20))
def test_ticks_are_maxnlocators(low: float, width: float, bins: int) -> None:
    expected = MaxNLocator(nbins=bins, steps=list(STEPS)).tick_values(low, low + width)
    assert np.array_equal(tick_values(low, low + width, bins), np.asarray(expected))


def test_a_trace_spans_ticks() -> None:
    """A picture's axis: milliseconds since the trace start, a few per 100 px."""
    assert tick_values(0.0, 47.1, 8).tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    assert tick_values(0.0, 47.1, 12).tolist() == [0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0,
                                                   40.0, 45.0, 50.0]  # fmt: skip


def test_the_pictures_font_is_matplotlibs() -> None:
    from matplotlib import get_data_path

    from recfn.analysis.plots.picture import font_path

    assert font_path() == os.path.join(get_data_path(), "fonts", "ttf", "DejaVuSans.ttf")
    assert os.path.exists(font_path())
