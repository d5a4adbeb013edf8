"""Points in time as the accessor's ``start=``/``end=`` take them, and the window a frame was
cut to.

A point is an int (ns on the ``start_ns`` clock, i.e. since the Unix epoch), a duration after
the trace start (a string such as ``"2ms"`` or ``"1.5s"``, a ``pd.Timedelta``,
``datetime.timedelta`` or ``np.timedelta64``) or an absolute time (``pd.Timestamp``,
``datetime.datetime``, ``np.datetime64``; naive ones are UTC).
"""

from __future__ import annotations

import datetime
import re
from typing import Union

import numpy as np
import pandas as pd

from recfn.analysis.columns import Events, event_columns
from recfn.errors import RecfnTypeError, RecfnValueError
from recfn.formats.schema import START_NS_KEY

TimeLike = Union[
    int,
    str,
    np.integer,
    pd.Timedelta,
    datetime.timedelta,
    np.timedelta64,
    pd.Timestamp,
    datetime.datetime,
    np.datetime64,
]
"""What ``start=`` / ``end=`` accept."""

WINDOW_KEY = "recfn.window"
"""``df.attrs`` key under which `RecfnAccessor.window` leaves the ``(start, end)`` it cut
(ns, None for open), so that a plot of the result covers the window, not the rows' extent."""

ORIGIN_KEY = "recfn.origin"
"""``df.attrs`` key under which `RecfnAccessor.window` keeps the trace start it measured
durations from, for frames without the trace's metadata."""

_UNIT = re.compile(r"[a-zA-Zµ]")


def trace_start(df: Events) -> int:
    """The trace's start (ns): ``recfn.start_ns`` from ``df.attrs`` when the frame carries the
    trace's metadata (or the start a `window` of it kept), else its earliest ``start_ns`` (0
    for an empty frame)."""
    kept = df.attrs.get(ORIGIN_KEY)
    if isinstance(kept, int):
        return kept
    meta = df.attrs.get("recfn")
    if isinstance(meta, dict):
        try:
            start = int(meta.get(START_NS_KEY, 0))
        except (TypeError, ValueError):
            start = 0
        if start:
            return start
    if "start_ns" in df.columns and len(df):
        return int(event_columns(df).ints("start_ns", np.iinfo(np.int64).max).min())
    return 0


def to_ns(value: TimeLike | None, origin: int, what: str) -> int | None:
    """`value` (see the module) as ns on the ``start_ns`` clock; durations count from `origin`.

    Raises ValueError naming `what` and the value for a string that is not a duration with a
    unit, TypeError for a value of another type.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise RecfnTypeError(f"{what}={value!r}: expected a time, got a bool")
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, str):
        return origin + _duration(value, what)
    if isinstance(value, pd.Timedelta | datetime.timedelta | np.timedelta64):
        delta = pd.Timedelta(value)
        if pd.isna(delta):
            raise RecfnValueError(f"{what}={value!r}: not a time (NaT)")
        return origin + int(delta.value)
    if isinstance(value, pd.Timestamp | datetime.datetime | np.datetime64):
        stamp = pd.Timestamp(value)
        if pd.isna(stamp):
            raise RecfnValueError(f"{what}={value!r}: not a time (NaT)")
        return int(stamp.value)  # naive stamps read as UTC, aware ones converted
    raise RecfnTypeError(
        f"{what}={value!r}: expected ns since the epoch (int), a duration after the trace start "
        f'("2ms", pd.Timedelta) or a pd.Timestamp, got {type(value).__name__}'
    )


def _duration(text: str, what: str) -> int:
    """ns of a duration string such as ``"2ms"``, ``"1.5s"`` or ``"250 us"``."""
    problem = f'{what}={text!r} is not a duration such as "2ms", "1.5s" or "250us"'
    if not _UNIT.search(text):
        raise RecfnValueError(f"{problem}: it needs a unit")
    try:
        delta = pd.Timedelta(text)
    except ValueError:
        raise RecfnValueError(problem) from None
    if pd.isna(delta):
        raise RecfnValueError(problem)
    return int(delta.value)


def window_of(df: Events) -> tuple[int | None, int | None]:
    """The ``(start, end)`` that `RecfnAccessor.window` cut `df` to; ``(None, None)`` when it
    was not cut."""
    found = df.attrs.get(WINDOW_KEY)
    if isinstance(found, tuple) and len(found) == 2:
        return found[0], found[1]
    return None, None


def keep_origin(picked: pd.DataFrame, source: pd.DataFrame) -> pd.DataFrame:
    """`picked` (rows of `source`) measuring durations from the trace start of `source`."""
    picked.attrs = {**picked.attrs, ORIGIN_KEY: trace_start(source)}
    return picked


def mark_window(
    cut: pd.DataFrame, source: pd.DataFrame, start: int | None, end: int | None
) -> pd.DataFrame:
    """`cut` (rows of `source`) remembering its window, ``[start, end]`` within the window
    `source` already had, and the trace start of `source`."""
    old_start, old_end = window_of(source)
    if old_start is not None:
        start = old_start if start is None else max(start, old_start)
    if old_end is not None:
        end = old_end if end is None else min(end, old_end)
    cut.attrs = {**cut.attrs, WINDOW_KEY: (start, end), ORIGIN_KEY: trace_start(source)}
    return cut
