"""Matplotlib helpers shared by the timeline and the flame view: rectangles and labels."""

from __future__ import annotations

import functools
import hashlib
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, Optional, cast

import matplotlib as mpl
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.text import Text

from recfn.analysis.columns import RANGE, codes, equals, ints, nulls
from recfn.analysis.units import printable
from recfn.errors import RecfnTypeError, RecfnValueError

MAX_BARS = 20_000
"""Most rectangles one view draws; past that the narrowest are left out (or rasterised)."""
MAX_LABELS = 200
LABEL_MIN_PX = 40.0
FONT_SIZE = 7
CHAR_PX = 5.5
"""Approximate width of one label character at `FONT_SIZE` and 100 dpi."""
NULL_COLOR = "#c7c7c7"
"""Colour of bars whose colouring value is null; no name gets it."""


def check_figure(ax: object, figsize: object, what: str) -> None:
    """`what`'s ``ax`` (None or a matplotlib Axes) and ``figsize`` (None or a pair of positive
    numbers, for a new figure only): RecfnTypeError or RecfnValueError naming them otherwise."""
    if ax is not None and not isinstance(ax, Axes):
        raise RecfnTypeError(f"{what}: ax must be a matplotlib Axes or None, got {ax!r}")
    if figsize is None:
        return
    if ax is not None:
        raise RecfnValueError(f"{what}: figsize= sizes a new figure; it cannot be given with ax=")
    sizes = list(figsize) if isinstance(figsize, Sequence) and not isinstance(figsize, str) else []
    if len(sizes) != 2 or not all(
        isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
        for v in sizes
    ):
        raise RecfnTypeError(f"{what}: figsize must be (width, height) in inches, got {figsize!r}")
    if not all(0 < v < float("inf") for v in sizes):
        raise RecfnValueError(f"{what}: figsize must be positive, got {figsize!r}")


def _palette() -> np.ndarray:
    """tab20, tab20b and tab20c without their greys: 54 colours (RGBA rows)."""
    colors = [
        rgba
        for cmap in ("tab20", "tab20b", "tab20c")
        for rgba in mpl.colormaps[cmap](np.arange(20))
        if np.ptp(rgba[:3]) > 0.05
    ]
    return np.array(colors)


PALETTE = _palette()
"""The colours names get: a name's colour is ``PALETTE[blake2b(name) % len(PALETTE)]``."""


def name_colors(values: Iterable[object]) -> np.ndarray:
    """One RGBA row per value: the same value always gets the same colour, in every plot,
    cell and process (a blake2b hash of its text picks it; Python's ``hash`` is salted per
    process). Different names can share a colour: plots colour with `assign_colors`, which
    starts from this colour and keeps the heaviest names of a plot apart. None and NaN get
    `NULL_COLOR`."""
    rows = [
        np.array(to_rgba(NULL_COLOR)) if _is_null(value) else PALETTE[_slot(str(value))]
        for value in values
    ]
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
        null = np.array(to_rgba(NULL_COLOR))
        rows = [null if (slot := self.slot(int(i))) < 0 else PALETTE[slot] for i in indices]
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
        rows = np.tile(np.array(to_rgba(NULL_COLOR)), (len(self.texts), 1))
        rows[slots >= 0] = PALETTE[slots[slots >= 0]]
        return rows.reshape(-1, 4)

    def hex(self, index: int) -> str:
        """``#rrggbb`` of value ``index`` (what the interactive view draws with)."""
        return hex_color(self.rgba([index])[0])


def column_colors(
    df: Any, column: str = "name", duration: Optional[np.ndarray] = None
) -> tuple[np.ndarray, Any, np.ndarray]:
    """The codes of `df[column]`, its distinct values, and their colours (`assign_colors`
    weighted by the time of each value's closed ranges; one extra last row, `NULL_COLOR`,
    for code -1). `duration`: each row's closed-range duration (0 for other rows), where the
    caller has it (``Nodes.duration``)."""
    value_codes, values = codes(df[column])
    if duration is None:
        closed = equals(df["kind"], RANGE) & ~nulls(df["end_ns"])
        duration = np.where(closed, ints(df["end_ns"], 0) - ints(df["start_ns"], 0), 0)
    weight = np.bincount(value_codes + 1, weights=duration, minlength=len(values) + 1)[1:]
    palette = np.vstack([assign_colors(values, weight), to_rgba(NULL_COLOR)])
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


_ALT_TEXT: weakref.WeakKeyDictionary[Artist, str] = weakref.WeakKeyDictionary()


def set_alt_text(ax: Axes, text: str) -> None:
    """Remember `text` as the description of what `ax` (and its figure) shows."""
    _ALT_TEXT[ax] = text
    _ALT_TEXT[ax.figure] = text


def alt_text(target: Axes | Figure) -> str:
    """A one-line description of a plot that ``df.recfn.timeline()`` or ``.flame()`` drew on
    `target` (an Axes or its Figure; for a figure, the last plot drawn on it), for the
    ``alt`` attribute of an image; ValueError when recfn drew nothing there."""
    found = _ALT_TEXT.get(target)
    if found is None:
        raise RecfnValueError("alt_text: recfn drew no timeline or flame graph on this Axes/Figure")
    return found


def add_rectangles(
    ax: Axes,
    x0: np.ndarray,
    x1: np.ndarray,
    y: np.ndarray,
    half_height: float,
    colors: np.ndarray,
    pixels: np.ndarray,
) -> None:
    """One PolyCollection of rectangles centred on `y`; white edges on those at least 4 px wide."""
    if x0.size == 0:
        return
    top, bottom = y - half_height, y + half_height
    corners = [(x0, top), (x0, bottom), (x1, bottom), (x1, top)]
    verts = np.stack([np.stack(corner, axis=1) for corner in corners], axis=1)
    edges = np.where(pixels >= 4, 0.3, 0.0)
    bars = PolyCollection(cast(Any, verts), facecolors=colors, edgecolors="white", linewidths=edges)
    ax.add_collection(bars)


def add_labels(
    ax: Axes,
    names: np.ndarray,
    x0: np.ndarray,
    y: np.ndarray,
    pixels: np.ndarray,
    units_per_px: float,
) -> None:
    """Names on the widest rectangles (at most `MAX_LABELS`), cut to what fits."""
    chosen = np.flatnonzero(pixels >= LABEL_MIN_PX)
    chosen = chosen[np.argsort(-pixels[chosen], kind="stable")[:MAX_LABELS]]
    for i in chosen.tolist():
        label = fit_label(printable(str(names[i])), pixels[i])
        if label:
            ax.text(
                x0[i] + 3 * units_per_px,
                y[i],
                label,
                fontsize=FONT_SIZE,
                va="center",
                ha="left",
                clip_on=True,
                parse_math=False,
                usetex=False,
            )


def plain_text(texts: Iterable[Text]) -> None:
    """Draw `texts` as the characters they hold: names are data, so ``$\\alpha$`` must not
    become a Greek letter, nor deeply nested TeX exhaust the math parser."""
    for text in texts:
        text.set_parse_math(False)
        text.set_usetex(False)


def fit_label(label: str, pixels: float) -> str:
    """`label` cut with an ellipsis to fit `pixels`; empty when not even two characters fit."""
    fits = int((pixels - 6) / CHAR_PX)
    if len(label) > fits:
        label = label[: max(fits - 1, 0)] + "…"
    return label if len(label) >= 2 else ""
