"""Progress bars on long work (reading many files): tqdm's, on a terminal or in a notebook,
and nothing at all when not interactive (CI, pipes, logs) or when tqdm is not installed."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Optional, TypeVar

T = TypeVar("T")

MIN_ITEMS = 2
"""Fewer items than this show no bar."""


def interactive() -> bool:
    """Whether a person is watching: a notebook kernel, or standard error on a terminal; never
    under CI (``CI`` set) or with ``RECFN_PROGRESS=0``."""
    if os.environ.get("CI") or os.environ.get("RECFN_PROGRESS", "1") == "0":
        return False
    if _in_notebook():
        return True
    stream = sys.stderr
    return stream is not None and hasattr(stream, "isatty") and stream.isatty()


def _in_notebook() -> bool:
    """Whether this code runs in a Jupyter kernel (not merely with ipykernel imported)."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def progress(items: Iterable[T], *, total: Optional[int] = None, desc: str = "") -> Iterator[T]:
    """``items``, with a progress bar while they are consumed when ``interactive()``."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    if not interactive() or (total is not None and total < MIN_ITEMS):
        yield from items
        return
    try:
        from tqdm.auto import tqdm
    except ImportError:
        yield from items
        return
    yield from tqdm(items, total=total, desc=desc, unit="file", leave=False)


class Bar:
    """A progress bar counted in `unit` (events, bytes) while a long conversion runs: tqdm's
    when ``interactive()``, else nothing. Use as a context manager; ``update(n)`` adds n."""

    def __init__(self, total: Optional[int], *, desc: str = "", unit: str = "events") -> None:
        self._bar = None
        if interactive():
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            scale = unit == "B"
            self._bar = tqdm(
                total=total,
                desc=desc,
                unit=unit,
                unit_scale=scale,
                unit_divisor=1024 if scale else 1000,
                leave=False,
            )

    def update(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()
