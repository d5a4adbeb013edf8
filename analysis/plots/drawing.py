"""Matplotlib helpers shared by the timeline and the flame view: rectangles and labels."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from typing import Any, cast

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.text import Text

from recfn.analysis.plots.chart import LABEL_MIN_PX, MAX_LABELS
from recfn.analysis.units import printable
from recfn.errors import RecfnTypeError, RecfnValueError

FONT_SIZE = 7
CHAR_PX = 5.5
"""Approximate width of one label character at `FONT_SIZE` and 100 dpi."""


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
