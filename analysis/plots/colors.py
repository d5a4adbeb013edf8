"""The colours of names, the same in the timeline, the flame graph, the notebook's picture and
the interactive view: each name's own colour from a hash of its text, the heaviest names of a
plot kept apart (`NameColors`). Plain numpy: the notebook's picture and view draw without
importing matplotlib (about a quarter of a second of loading the extension), whose colormaps
these constants are (tests/analysis/test_colors.py compares them).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from typing import Any, Optional

import numpy as np

from recfn.analysis.columns import RANGE, Events, event_columns

TAB20: tuple[str, ...] = (
    "#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896",
    "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#bcbd22", "#dbdb8d",
    "#17becf", "#9edae5", "#393b79", "#5254a3", "#6b6ecf", "#9c9ede", "#637939", "#8ca252",
    "#b5cf6b", "#cedb9c", "#8c6d31", "#bd9e39", "#e7ba52", "#e7cb94", "#843c39", "#ad494a",
    "#d6616b", "#e7969c", "#7b4173", "#a55194", "#ce6dbd", "#de9ed6", "#3182bd", "#6baed6",
    "#9ecae1", "#c6dbef", "#e6550d", "#fd8d3c", "#fdae6b", "#fdd0a2", "#31a354", "#74c476",
    "#a1d99b", "#c7e9c0", "#756bb1", "#9e9ac8", "#bcbddc", "#dadaeb",
)  # fmt: skip
"""matplotlib's tab20, tab20b and tab20c without their greys: 54 colours."""
DARK2: tuple[str, ...] = (
    "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666",
)  # fmt: skip
"""matplotlib's Dark2: the memory lines' colours, one per device in turn."""
NULL_COLOR = "#c7c7c7"
"""Colour of bars whose colouring value is null; no name gets it."""


def rgba(color: str) -> np.ndarray:
    """``#rrggbb`` as an RGBA row of floats in [0, 1] (opaque), as matplotlib's ``to_rgba``."""
    return np.array([int(color[i : i + 2], 16) / 255 for i in (1, 3, 5)] + [1.0])


PALETTE = np.array([rgba(color) for color in TAB20])
"""The colours names get: a name's colour is ``PALETTE[blake2b(name) % len(PALETTE)]``."""
NULL_RGBA = rgba(NULL_COLOR)


def name_colors(values: Iterable[object]) -> np.ndarray:
    """One RGBA row per value: the same value always gets the same colour, in every plot,
    cell and process (a blake2b hash of its text picks it; Python's ``hash`` is salted per
    process). Different names can share a colour: plots colour with `assign_colors`, which
    starts from this colour and keeps the heaviest names of a plot apart. None and NaN get
    `NULL_COLOR`."""
    rows = [NULL_RGBA if _is_null(value) else PALETTE[_slot(str(value))] for value in values]
    return np.array(rows).reshape(-1, 4)


DISTINCT_TOP = 16
"""The heaviest names of a plot whose colours no other name of that plot shares."""


def assign_colors(values: Sequence[object], weights: np.ndarray) -> np.ndarray:
    """One RGBA row per value of one plot (a trace, a frame): see `NameColors`."""
    return NameColors(values, weights).all()


class NameColors:
    """The colours of the values of one plot: each value's own colour (`name_colors`) unless
    a heavier value of the plot took it first.

    Values are taken heaviest first (`weights`: time per value; ties by text), and each takes
    the first free palette colour from its own: so up to ``len(PALETTE)`` values get distinct
    colours, and the `DISTINCT_TOP` heaviest share theirs with no other value however many
    there are. A value keeps its colour across plots and cells unless two heavy values of one
    plot hash alike. The timeline, the flame graph and the interactive view all colour with
    this, from the same weights, so a name has one colour in all of them. None and NaN get
    `NULL_COLOR`. Colours past the heaviest are worked out when first asked for, so a view of
    many names pays only for those it shows.
    """

    def __init__(self, values: Sequence[object], weights: np.ndarray) -> None:
        listed = values.tolist() if hasattr(values, "tolist") else values  # an Index: its list
        self.texts = [None if _is_null(v) else str(v) for v in listed]
        weight = np.asarray(weights, dtype=np.float64).reshape(-1)
        if weight.size != len(self.texts):
            raise ValueError(f"NameColors: {len(self.texts)} values but {weight.size} weights")
        size = len(PALETTE)
        known = np.array([text is not None for text in self.texts], dtype=bool)
        candidates = np.flatnonzero(known)
        if candidates.size > size:  # the heaviest `size`, and any tied with the last of them
            bar = np.partition(-weight[candidates], size - 1)[size - 1]
            candidates = candidates[-weight[candidates] <= bar]
        heaviest = sorted(candidates.tolist(), key=lambda i: (-weight[i], self.texts[i]))[:size]
        self._slots: dict[int, int] = {}
        taken = np.zeros(size, dtype=bool)
        self._reserved = np.zeros(size, dtype=bool)
        for rank, i in enumerate(heaviest):
            slot = self._free(_slot(str(self.texts[i])), taken)
            self._slots[i] = slot
            taken[slot] = True
            if rank < DISTINCT_TOP:
                self._reserved[slot] = True

    @staticmethod
    def _free(slot: int, blocked: np.ndarray) -> int:
        if blocked.all():  # only with a palette smaller than DISTINCT_TOP
            return slot
        while blocked[slot]:
            slot = (slot + 1) % len(blocked)
        return slot

    def slot(self, index: int) -> int:
        """The palette row of value ``index``; -1 for a null value."""
        found = self._slots.get(index)
        if found is None:
            text = self.texts[index]
            if text is None:
                return -1
            found = self._slots[index] = self._free(_slot(text), self._reserved)
        return found

    def rgba(self, indices: Iterable[int]) -> np.ndarray:
        """One RGBA row per value index (`NULL_COLOR` for nulls)."""
        rows = [NULL_RGBA if (slot := self.slot(int(i))) < 0 else PALETTE[slot] for i in indices]
        return np.array(rows).reshape(-1, 4)

    def all(self) -> np.ndarray:
        """`rgba` of every value, in one pass (the probing done for all values at once)."""
        size = len(PALETTE)
        slots = np.array([-1 if t is None else _slot(t) for t in self.texts], dtype=np.int64)
        slots = slots.reshape(-1)
        rest = np.flatnonzero(slots >= 0)
        rest = rest[~np.isin(rest, np.fromiter(self._slots, dtype=np.int64))]
        if not self._reserved.all():
            for _ in range(size):
                blocked = rest[self._reserved[slots[rest]]]
                if blocked.size == 0:
                    break
                slots[blocked] = (slots[blocked] + 1) % size
        for index, slot in self._slots.items():
            slots[index] = slot
        rows = np.tile(NULL_RGBA, (len(self.texts), 1))
        rows[slots >= 0] = PALETTE[slots[slots >= 0]]
        return rows.reshape(-1, 4)

    def hex(self, index: int) -> str:
        """``#rrggbb`` of value ``index`` (what the interactive view draws with)."""
        return hex_color(self.rgba([index])[0])


def column_colors(
    df: Events, column: str = "name", duration: Optional[np.ndarray] = None
) -> tuple[np.ndarray, Any, np.ndarray]:
    """The codes of `df[column]`, its distinct values, and their colours (`assign_colors`
    weighted by the time of each value's closed ranges; one extra last row, `NULL_COLOR`,
    for code -1). `duration`: each row's closed-range duration (0 for other rows), where the
    caller has it (``Nodes.duration``)."""
    columns = event_columns(df)
    value_codes, values = columns.codes(column)
    if duration is None:
        closed = columns.equals("kind", RANGE) & ~columns.nulls("end_ns")
        duration = np.where(closed, columns.ints("end_ns", 0) - columns.ints("start_ns", 0), 0)
    weight = np.bincount(value_codes + 1, weights=duration, minlength=len(values) + 1)[1:]
    palette = np.vstack([assign_colors(values, weight), NULL_RGBA])
    return value_codes, values, palette


def hex_color(rgba: np.ndarray) -> str:
    """``#rrggbb`` of an RGBA row (what the interactive view draws with)."""
    red, green, blue = (round(float(c) * 255) for c in rgba[:3])
    return f"#{red:02x}{green:02x}{blue:02x}"


@functools.lru_cache(maxsize=4096)
def _slot(text: str) -> int:
    """The palette row of `text`'s own colour (a hash: the same in every process and session);
    remembered, as a notebook's cells repeat their names."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "little") % len(PALETTE)


def _is_null(value: object) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))
