"""Round tick positions (1, 2, 2.5 or 5 times a power of ten) for the notebook's picture,
placed as matplotlib's ``MaxNLocator(nbins, steps=[1, 2, 2.5, 5, 10])`` places them (its
algorithm, with matplotlib's default settings), so that drawing a picture does not import
matplotlib. tests/analysis/test_picture_ticks.py compares the two.
"""

from __future__ import annotations

import math

import numpy as np

STEPS = np.array([1.0, 2.0, 2.5, 5.0, 10.0])
"""The multiples of a power of ten a tick step may be."""
_STAIRCASE = np.concatenate([0.1 * STEPS[:-1], STEPS, [10 * STEPS[1]]])


def tick_values(low: float, high: float, bins: int) -> np.ndarray:
    """At most ``bins + 1`` round ticks covering ``[low, high]`` (the first and last may lie
    just outside it), at least two of them inside it where the range allows."""
    low, high = _nonsingular(low, high)
    scale, offset = _scale_range(low, high, bins)
    start, stop = low - offset, high - offset
    steps = _STAIRCASE * scale
    large = steps >= (stop - start) / bins
    first_large = int(np.nonzero(large)[0][0]) if large.any() else len(steps) - 1
    ticks = np.zeros(0)
    for step in steps[: first_large + 1][::-1]:  # the smallest large step that gives two ticks
        base = (start // step) * step
        tolerance = _tolerance(step, offset)
        first = _at_most(start - base, step, tolerance)
        last = _at_least(stop - base, step, tolerance)
        ticks = np.arange(first, last + 1) * step + base
        if ((ticks <= stop) & (ticks >= start)).sum() >= 2:
            break
    return ticks + offset


def _nonsingular(low: float, high: float) -> tuple[float, float]:
    """``low < high``, widened where the range is empty or too small for floats to tell apart
    (matplotlib's ``_nonsingular`` with the locator's expander and tiny)."""
    expander, tiny = 1e-13, 1e-14
    if not (np.isfinite(low) and np.isfinite(high)):
        return -expander, expander
    if high < low:
        low, high = high, low
    low, high = float(low), float(high)
    largest = max(abs(low), abs(high))
    if largest < (1e6 / tiny) * np.finfo(float).tiny:
        return -expander, expander
    if high - low <= largest * tiny:
        if high == 0 and low == 0:
            return -expander, expander
        return low - expander * abs(low), high + expander * abs(high)
    return low, high


def _scale_range(low: float, high: float, bins: int) -> tuple[float, float]:
    """The power of ten of the range over ``bins``, and an offset near the range's middle where
    the range is small beside its values."""
    span = abs(high - low)
    middle = (high + low) / 2
    offset = 0.0
    if abs(middle) / span >= 100:
        offset = math.copysign(10 ** (math.log10(abs(middle)) // 1), middle)
    return 10 ** (math.log10(span / bins) // 1), offset


def _tolerance(step: float, offset: float) -> float:
    """How far from a whole number of steps still counts as one (more where the offset is
    large beside the step: its digits are lost)."""
    if offset == 0:
        return 1e-10
    digits = np.log10(abs(offset) / step)
    return float(min(0.4999, max(1e-10, 10 ** (digits - 12))))


def _at_most(x: float, step: float, tolerance: float) -> float:
    """The largest n with n * step <= x (give or take the tolerance)."""
    whole, rest = divmod(x, step)
    return whole + 1 if abs(rest / step - 1) < tolerance else whole


def _at_least(x: float, step: float, tolerance: float) -> float:
    """The smallest n with n * step >= x (give or take the tolerance)."""
    whole, rest = divmod(x, step)
    return whole if abs(rest / step) < tolerance else whole + 1
