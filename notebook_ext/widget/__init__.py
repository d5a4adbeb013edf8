"""The interactive timeline: a level-of-detail engine over the event table (``lod``) and an
anywidget view that asks it for what its viewport shows (``view.TimelineWidget``).

``timeline_widget(trace)`` builds the view; ``make_widget`` is what the magic's display calls.
anywidget is imported only there, so the rest of the extension works without it.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING, Any, Optional

from recfn.errors import RecfnTypeError

if TYPE_CHECKING:
    from recfn.notebook_ext.widget.view import TimelineWidget


def timeline_widget(trace: Any, *, summary: bool = True) -> TimelineWidget:
    """The interactive view of ``trace``: a ``pyarrow.Table`` of events or anything with a
    ``.table`` that is one (a ``Trace``). Needs ``anywidget`` (``pip install recfn[notebook]``).
    ``summary=False``: the summary pane's table comes later (``fill_summary``)."""
    import pyarrow as pa

    table = trace if isinstance(trace, pa.Table) else getattr(trace, "table", None)
    if not isinstance(table, pa.Table):
        raise RecfnTypeError(
            f"timeline_widget needs a pyarrow.Table of events or a Trace, got {type(trace).__name__}"
        )
    from recfn.notebook_ext.widget.view import TimelineWidget

    return TimelineWidget(table, name=str(getattr(trace, "name", "trace")), summary=summary)


def can_show(shell: Any) -> bool:
    """Whether ``shell`` runs in a kernel whose frontend can talk to a widget, and anywidget is
    installed (a terminal IPython or a plain InteractiveShell gets no widget)."""
    return getattr(shell, "kernel", None) is not None and bool(
        importlib.util.find_spec("anywidget")
    )


def make_widget(trace: Any, shell: Any) -> Optional[TimelineWidget]:
    """The interactive view of ``trace`` for the magic, when ``can_show`` and it has events."""
    if not can_show(shell) or getattr(trace, "table", None) is None or not trace.table.num_rows:
        return None
    try:
        return timeline_widget(trace, summary=False)  # show() fills it once the view is out
    except Exception as exc:  # the static output is shown anyway; say why this is missing
        print(
            f"recfn: interactive timeline not shown: {type(exc).__name__}: {exc}", file=sys.stderr
        )
        return None
