"""The session: every trace the magics captured in this process, by cell, plus the appended trace.

``recfn.session()`` returns it. Cells are looked up by position or name
(``s["cell[4]"].diff(s["cell[3]"])``: how cell[4] changed from the baseline cell[3],
or simply ``s.diff("cell[3]", "cell[4]")``, in the order of ``recfn diff BASELINE CURRENT``).
Cells run with ``--append`` also build one combined trace, ``s.trace()``.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Optional, Union

from recfn.errors import RecfnTypeError, RecfnValueError
from recfn.formats.trace import Trace, merge

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_MAX_CELLS = 32  # traces can be large; -o variables keep older ones alive if wanted


class Session:
    """Per-cell traces, most recent last. Keeps at most ``max_cells`` (the oldest go first)."""

    def __init__(self, max_cells: int = DEFAULT_MAX_CELLS) -> None:
        if max_cells <= 0:
            raise RecfnValueError(f"max_cells must be positive, got {max_cells}")
        self.max_cells = max_cells
        self._cells: list[Trace] = []
        self._appended: list[Trace] = []
        self._combined: Optional[Trace] = None

    # -- filling ------------------------------------------------------------------------------

    def add(self, trace: Trace, append: bool = False) -> None:
        """Keep ``trace``; with ``append`` it also joins the combined trace (``trace()``)."""
        if not isinstance(trace, Trace):
            raise RecfnTypeError(f"Session.add expects a Trace, got {type(trace).__name__}")
        self._cells.append(trace)
        del self._cells[: -self.max_cells]
        if append:
            self._appended.append(trace)
            self._combined = None

    def reset(self) -> int:
        """Forget every trace; returns how many cells were dropped."""
        count = len(self._cells)
        self._cells.clear()
        self._appended.clear()
        self._combined = None
        return count

    # -- lookup -------------------------------------------------------------------------------

    @property
    def cells(self) -> tuple[Trace, ...]:
        return tuple(self._cells)

    @property
    def appended(self) -> tuple[Trace, ...]:
        """The cells run with ``--append``, in order."""
        return tuple(self._appended)

    @property
    def last(self) -> Optional[Trace]:
        return self._cells[-1] if self._cells else None

    def names(self) -> list[str]:
        return [trace.name for trace in self._cells]

    def __len__(self) -> int:
        return len(self._cells)

    def __iter__(self) -> Iterator[Trace]:
        return iter(list(self._cells))

    def __contains__(self, key: object) -> bool:
        return any(trace.name == key for trace in self._cells)

    def __getitem__(self, key: Union[int, str]) -> Trace:
        """A cell by position (``-1``: the last) or by name (the latest with that name)."""
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise RecfnTypeError(f"session cells are indexed by position or name, not {key!r}")
        if isinstance(key, int):
            try:
                return self._cells[key]
            except IndexError:
                raise IndexError(
                    f"no session cell at position {key}: the session has {len(self._cells)}"
                ) from None
        for trace in reversed(self._cells):
            if trace.name == key:
                return trace
        known = ", ".join(self.names()) or "none yet"
        raise KeyError(f"no session cell named {key!r} (cells: {known})")

    # -- results ------------------------------------------------------------------------------

    def trace(self) -> Trace:
        """The cells run with ``--append`` merged into one trace."""
        if not self._appended:
            raise RecfnValueError("no cell was run with --append yet: nothing to combine")
        if self._combined is None:
            self._combined = merge(self._appended, name="session")
        return self._combined

    def diff(self, baseline: Union[int, str], current: Union[int, str]) -> pd.DataFrame:
        """Per name, how cell ``current`` changed from cell ``baseline`` (``df.recfn.diff``);
        the same order as ``recfn diff BASELINE CURRENT``."""
        return self[current].diff(self[baseline])

    def _repr_html_(self) -> str:
        from recfn.notebook_ext.display import format_ns

        if not self._cells:
            return "<p><b>recfn session</b>: no profiled cells yet</p>"
        rows = "".join(
            "<tr>"
            f"<td>{i}</td><td>{html.escape(t.name)}</td><td>{format_ns(t.wall_ns)}</td>"
            f"<td>{t.events:,}</td><td>{t.threads}</td><td>{t.dropped_events:,}</td>"
            f"<td>{html.escape(t.error or 'ok')}</td><td>{'yes' if t in self._appended else ''}</td>"
            "</tr>"
            for i, t in enumerate(self._cells)
        )
        return (
            f"<p><b>recfn session</b>: {len(self._cells)} cells</p>"
            '<table class="recfn-session"><thead><tr><th>#</th><th>name</th><th>wall</th>'
            "<th>events</th><th>threads</th><th>dropped</th><th>status</th><th>appended</th>"
            f"</tr></thead><tbody>{rows}</tbody></table>"
        )

    def __repr__(self) -> str:
        if not self._cells:
            return "<recfn.Session: no profiled cells yet>"
        lines = [f"<recfn.Session: {len(self._cells)} cells>"]
        lines += [f"  [{i}] {t.header()}" for i, t in enumerate(self._cells)]
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


_session: Optional[Session] = None


def current_session() -> Session:
    """The process-wide session (created on first use)."""
    global _session
    if _session is None:
        _session = Session()
    return _session
