"""How a trace looks: the header line, the summary as HTML or text, the timeline as a PNG.

Plain HTML and a PNG (matplotlib's Agg canvas, no pyplot state) only: no widgets and no server,
so the output renders the same in JupyterLab, VS Code, nbviewer and exported HTML.
"""

from __future__ import annotations

import base64
import html
import math
import numbers
import sys
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional

from recfn.notebook_ext.capture import call_tracing, estimated_overhead_ns, overhead_share
from recfn.notebook_ext.export import chrome_gz, no_progress_bars
from recfn.notebook_ext.fallback import DEFAULT_OUTPUT_BUDGET, utf8_size
from recfn.notebook_ext.options import (
    ZERO_ANNOTATION_EXCLUDE,
    config_flags,
    follows_user_code,
)
from recfn.notebook_ext.text_table import TextTable
from recfn.notebook_ext.widget import make_widget

if TYPE_CHECKING:
    import pandas as pd

    from recfn.formats.trace import Trace

TIMELINE_WIDTH_IN = 10.0
TIMELINE_DPI = 96

_STYLE = (
    "<style>"
    ".recfn-header{font-family:monospace;margin:0 0 4px 0}"
    ".recfn-interrupted{color:#b00020}"
    ".recfn-note{font-size:85%;opacity:0.8;margin:2px 0}"
    "table.recfn-summary td,table.recfn-summary th{text-align:right;padding:1px 8px}"
    "table.recfn-summary td:first-child,table.recfn-summary th:first-child{text-align:left}"
    "</style>"
)


def _number(value: Any) -> float:
    """``value`` as a float, NaN for anything missing (None, pd.NA, NaN, non-numbers)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number


def format_ns(ns: Any) -> str:
    """A duration with a unit, as analysis' text tables write it (``12.345us``); ``-`` if missing."""
    from recfn.analysis.units import format_ns as fmt

    return fmt(_number(ns))


def format_bytes(count: Any) -> str:
    from recfn.analysis.units import format_bytes as fmt

    return fmt(_number(count))


def format_count(count: Any) -> str:
    from recfn.analysis.units import format_count as fmt

    return fmt(_number(count))


def header_text(trace: Trace) -> str:
    """One line: name, wall time, events, threads, dropped, the recording overhead (measured:
    see ``estimated_overhead_ns``) as a share of the capture's time, the capture options that
    differ from the defaults (as flags; the zero-annotation default in words), the library
    frames hidden by following user code, and how the cell ended."""
    parts = [
        f"recfn · {trace.name}",
        f"{format_ns(trace.wall_ns)} wall",
        f"{trace.events:,} events",
        f"{trace.threads} thread{'s' if trace.threads != 1 else ''}",
        f"{trace.dropped_events:,} dropped",
    ]
    overhead = estimated_overhead_ns(trace)
    share = overhead_share(trace)
    if overhead is not None and share is not None:
        parts.append(f"≈{format_ns(overhead)} recording overhead ({share:.0%} of the time)")
    config = dict(trace.config)
    skip = ["sampling_prob"]
    if follows_user_code(config):
        parts.append("your code's calls and the library calls it makes (--no-trace-calls: off)")
        skip += ["trace_calls", "trace_user_code"]
        exclude = [p for p in config.get("trace_exclude") or () if p not in ZERO_ANNOTATION_EXCLUDE]
        config["trace_exclude"] = exclude or None
        hidden = hidden_text(trace)
        if hidden:
            parts.append(hidden)
    sample = config.get("sampling_prob", 1.0)
    if isinstance(sample, (int, float)) and sample < 1.0:
        parts.append(f"ranges sampled at {sample:.0%}")
    flags = config_flags(config, skip=skip)
    if flags:
        parts.append(" ".join(flags))
    if len(trace.cells) > 1:
        parts.append(f"{len(trace.cells)} cells")
    if trace.error:
        parts.append(f"interrupted by {trace.error}")
    if trace.files:
        from recfn.formats.dataset import unfinished_captures

        lost = unfinished_captures(trace.files, trace.footers)
        if lost:
            parts.append(
                f"{len(lost)} process{'es' if len(lost) != 1 else ''} never stopped (killed?): "
                "what they recorded after their last part is lost "
                "(recfn.dataset.unfinished_captures)"
            )
    return " · ".join(parts)


def hidden_text(trace: Trace, packages: int = 3) -> str:
    """``"80,151 library frames hidden (pandas 80,140, numpy 11)"``: the library calls that call
    tracing counted without recording them (``recfn.call_tracing``), the largest ``packages``
    named; empty when none were hidden."""
    hidden = call_tracing(trace).get("hidden") or {}
    counts = sorted(
        ((str(name), int(count)) for name, count in hidden.items() if int(count) > 0),
        key=lambda item: (-item[1], item[0]),
    )
    total = sum(count for _, count in counts)
    if not total:
        return ""
    named = ", ".join(f"{name} {count:,}" for name, count in counts[:packages])
    more = ", ..." if len(counts) > packages else ""
    return f"{total:,} library frame{'s' if total != 1 else ''} hidden ({named}{more})"


MEMORY_LABELS = {
    "allocated_bytes": "allocated",
    "freed_bytes": "freed",
    "total_memory_bytes": "net memory",
    "self_memory_bytes": "self net memory",
}
"""What the summary's memory columns are called in the tables shown (notes explain them)."""
MEMORY_NOTE = (
    "memory: bytes of the memory events in each range and the ranges it calls; allocated, "
    "freed, and net = allocated − freed (negative: the range freed more than it allocated, "
    "such as memory allocated before it); self net memory: its own events only."
)


def format_cell(label: str, value: Any) -> str:
    """One value of a summary or diff column ``label`` as text with its unit: ``*_pct`` as a
    percent (``new`` for a change from zero), ``*_ns`` as a time, bytes and FLOPs scaled,
    counts with thousands separators."""
    if label.endswith("_pct"):
        return _percent(value)
    if "_ns" in label:
        return format_ns(value)
    if "bytes" in label:
        return format_bytes(value)
    if label == "flops":
        return format_count(value)
    return "" if _is_missing(value) else _plain(value)


def summary_for_display(frame: pd.DataFrame) -> pd.DataFrame:
    """A summary or diff frame of the accessor as strings with units (`summary_table`'s
    cells), its group keys (the index) first, columns named for reading."""
    import pandas as pd

    table = summary_table(frame)
    return pd.DataFrame(dict(zip(table.titles, table.columns)), columns=table.titles, dtype=object)


def summary_table(frame: pd.DataFrame) -> TextTable:
    """A summary or diff frame of the accessor as a table of strings with units
    (`format_cell`): its group keys (the index) first, columns named for reading (``total %``,
    ``self``, the `MEMORY_LABELS`)."""
    from recfn.analysis.stats.summary import without_gpu_time

    index = frame.index
    labelled: list[tuple[str, list[Any]]] = []
    if any(name is not None for name in index.names):  # the keys, as reset_index names them
        for level, name in enumerate(index.names):
            unnamed = "index" if index.nlevels == 1 else f"level_{level}"
            labelled.append(
                (unnamed if name is None else str(name), index.get_level_values(level).tolist())
            )
    # One conversion of the whole frame: a column taken at a time cost eight times as much.
    by_column = frame.to_numpy(dtype=object).T.tolist() if len(frame) else [[]] * frame.shape[1]
    labelled += [(str(column), cells) for column, cells in zip(frame.columns, by_column)]
    titles, columns = [], []
    for label, values in labelled:
        if label.endswith("_pct"):
            title = label[:-4].replace("_ns", "") + " %"
        elif label in MEMORY_LABELS:
            title = MEMORY_LABELS[label]
        elif "_ns" in label:
            title = label.replace("_ns", "")
        else:
            title = label
        titles.append(title)
        columns.append(without_gpu_time(frame, label, [format_cell(label, v) for v in values]))
    return TextTable(titles, columns)


def summary_notes(frame: pd.DataFrame) -> list[str]:
    """What the summary's columns mean, where it is not plain: ``total %`` (a share of the
    trace's wall time) and the memory columns."""
    notes = []
    if "total_pct" in frame.columns:
        wall = frame.attrs.get("wall_ns")
        of = f" ({format_ns(wall)})" if wall else ""
        notes.append(f"total %: a share of the trace's wall time{of}, first start to last end")
    if any(column in frame.columns for column in MEMORY_LABELS):
        notes.append(MEMORY_NOTE)
    return notes


def _percent(value: Any) -> str:
    number = _number(value)
    if math.isnan(number):
        return ""
    return "new" if math.isinf(number) else f"{number:.1f}%"


def _is_missing(value: Any) -> bool:
    import pandas as pd

    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _plain(value: Any) -> str:
    """Counts with thousands separators; anything else as ``str``, control characters escaped."""
    from recfn.analysis.units import printable

    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return f"{int(value):,}"
    if isinstance(value, float) and value.is_integer():
        return f"{int(value):,}"
    return printable(str(value))


def _summary_or_note(trace: Trace, top: int) -> tuple[Optional[TextTable], str]:
    """The summary shown (`summary_table`) and what its columns mean, or why there is
    none; made once per trace and ``top`` (the HTML and the text show the same table)."""
    shown = _SHOWN.setdefault(trace, {})
    if top not in shown:
        shown[top] = _laid_out_summary(trace, top)
    return shown[top]


def _laid_out_summary(trace: Trace, top: int) -> tuple[Optional[TextTable], str]:
    try:
        summary = trace.summary(top=top)
    except (ValueError, AttributeError) as exc:  # e.g. no ranges at all
        return None, f"no summary: {exc}"
    if summary is None or len(summary) == 0:
        return None, "no ranges recorded"
    return summary_table(summary), "; ".join(summary_notes(summary))


_SHOWN: weakref.WeakKeyDictionary[Trace, dict[int, tuple[Optional[TextTable], str]]] = (
    weakref.WeakKeyDictionary()
)


def header_html(trace: Trace) -> str:
    """The header line as HTML (red when the cell was interrupted)."""
    header_class = "recfn-header recfn-interrupted" if trace.error else "recfn-header"
    return f'{_STYLE}<div class="{header_class}"><b>{html.escape(header_text(trace))}</b></div>'


def trace_html(trace: Trace, top: int = 15) -> str:
    """Header line and the top ``top`` summary rows as an HTML table."""
    parts = [header_html(trace)]
    table, note = _summary_or_note(trace, top)
    if table is None:
        parts.append(f"<p>{html.escape(note)}</p>")
    else:
        parts.append(table.html("recfn-summary"))
        if note:
            parts.append(f'<p class="recfn-note">{html.escape(note)}</p>')
    return "".join(parts)


def trace_text(trace: Trace, top: int = 15) -> str:
    """Header line and the same top ``top`` rows as the HTML, as aligned text (terminals).

    Shares the cached summary with the HTML, so a notebook computes it once per trace.
    """
    table, note = _summary_or_note(trace, top)
    body = note if table is None else table.text()
    if table is not None and note:
        body += f"\n{note}"
    return f"{header_text(trace)}\n{body}"


def table_text(trace: Trace, top: int = 15, **summary_kwargs: Any) -> str:
    """Header line and ``df.recfn.to_string`` (torch-style text table) for the command line."""
    try:
        body = trace.to_pandas().recfn.to_string(top=top, **summary_kwargs)
    except (ValueError, AttributeError) as exc:  # AttributeError: the accessor's missing columns
        body = f"no summary: {exc}"
    return f"{header_text(trace)}\n{body}"


def render_timeline_png(trace: Trace, width_in: float = TIMELINE_WIDTH_IN) -> tuple[bytes, str]:
    """The timeline picture (`recfn.analysis.plots.picture`: the chart ``trace.timeline()``
    draws, in pixels, without matplotlib's figure): the PNG bytes and its alt text, which the
    PNG also carries as its Description. The header line is shown above the picture, so the
    title is its short form (`picture_title`); the height grows with the threads
    (`picture_height_in`)."""
    from recfn.analysis.plots.picture import timeline_png

    return timeline_png(
        trace.table,  # read from Arrow's memory: no pandas frame is built
        round(width_in * TIMELINE_DPI),
        round(picture_height_in(trace.threads) * TIMELINE_DPI),
        title=picture_title(trace),
    )


def picture_height_in(threads: int) -> float:
    """The timeline picture's height in inches for ``threads`` bands (at most 9)."""
    return min(1.5 + 0.9 * max(threads, 1), 9.0)


TITLE_NAME_CHARS = 40
"""The longest trace name the picture's title holds; longer ones are cut with an ellipsis."""


def picture_title(trace: Trace) -> str:
    """The timeline picture's title: name, wall time, events and threads (the header line,
    shown above the picture, says the rest)."""
    threads = trace.threads
    name = (
        trace.name if len(trace.name) <= TITLE_NAME_CHARS else trace.name[:TITLE_NAME_CHARS] + "…"
    )
    return (
        f"recfn · {name} · {format_ns(trace.wall_ns)} wall · {trace.events:,} events · "
        f"{threads} thread{'s' if threads != 1 else ''}"
    )


_PNGS: weakref.WeakKeyDictionary[Trace, tuple[bytes, str]] = weakref.WeakKeyDictionary()


def timeline_png(trace: Trace) -> tuple[bytes, str]:
    """``render_timeline_png``, cached per trace (showing a trace twice draws it once)."""
    picture = _PNGS.get(trace)
    if picture is None:
        picture = _PNGS[trace] = render_timeline_png(trace)
    return picture


def new_figure(threads: int, width_in: float = TIMELINE_WIDTH_IN) -> Any:
    """A pyplot-free Agg figure sized for ``threads`` bands (never shown by an inline backend)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, picture_height_in(threads)), dpi=TIMELINE_DPI)
    FigureCanvasAgg(fig)
    return fig


def wants_png(shell: Any) -> bool:
    """Whether the frontend shows images (terminal IPython only takes text/plain)."""
    formatter = getattr(shell, "display_formatter", None)
    active = getattr(formatter, "active_types", None)
    return active is None or "image/png" in active


def bundle_size(bundle: dict[str, Any]) -> int:
    """Bytes a display bundle takes in a saved notebook (its values as stored: text, base64)."""
    import json

    size = 0
    for value in bundle.values():
        if isinstance(value, bytes):
            size += (len(value) + 2) // 3 * 4
        elif isinstance(value, str):
            size += utf8_size(value)
        else:
            size += len(json.dumps(value))
    return size


def widget_bundle(widget: Any) -> dict[str, Any]:
    """The display bundle of ``widget`` (its view reference), empty for None."""
    bundle = widget._repr_mimebundle_() if widget is not None else None
    if isinstance(bundle, tuple):  # (data, metadata)
        bundle = bundle[0]
    return dict(bundle or {})


def picture_bundle(png: bytes, alt: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The timeline picture's display bundle and metadata: ``image/png`` with its alt text in
    the metadata (``{"image/png": {"alt": ...}}``), ``text/plain`` the alt text (what shows
    where images do not), and ``text/html`` the same picture as an ``<img>`` with that ``alt``:
    nbconvert's HTML takes an image's alt text from nowhere else, and says "No description"."""
    encoded = base64.b64encode(png).decode("ascii")
    image = (
        f'<img class="recfn-timeline-png" alt="{html.escape(alt)}" '
        f'src="data:image/png;base64,{encoded}">'
    )
    return {"image/png": png, "text/html": image, "text/plain": alt}, {"image/png": {"alt": alt}}


def show(
    trace: Trace,
    *,
    shell: Any,
    timeline: bool = True,
    budget: int = DEFAULT_OUTPUT_BUDGET,
    saved_path: Optional[str] = None,
) -> int:
    """Publish the trace: header and summary (HTML + text); then, when the frontend shows images
    and ``timeline`` is on, the interactive view (a widget when a kernel can run one), its HTML
    stand-in (``fallback``) and the timeline picture, each its own output. All of it stays
    within ``budget`` bytes: the picture first, the stand-in gets what is left (its embedded
    trace left out first); a picture that does not fit is left out, with a note. Returns the
    bytes published.

    Each output is published once and never replaced (a replaced widget output is a new view:
    a flicker that loses a zoom made meanwhile), except the header, which the summary table
    fills in place: with a widget the header goes out first and the widget right after it, so a
    large trace's view paints without waiting for the table. The stand-in is an output of its
    own, so that an exported notebook shows it whether or not it stored the widget's state;
    where the widget runs, its stylesheet hides the stand-in of its own cell. No progress bar
    reaches the outputs (`export.no_progress_bars`).
    """
    from concurrent.futures import ThreadPoolExecutor

    from recfn.notebook_ext.fallback import FAST_GZIP_LEVEL, may_embed

    pictures = timeline and wants_png(shell)
    with no_progress_bars(), ThreadPoolExecutor(1, thread_name_prefix="recfn-display") as pool:
        # The stand-in's Chrome file is built meanwhile: Arrow's kernels and zlib run without
        # the GIL, beside the summary and the picture, which hold it.
        chrome = None
        # trace.table reads a trace of files here: the thread only reads what is in memory.
        if pictures and may_embed(trace, budget) and trace.table.num_rows:
            chrome = pool.submit(chrome_gz, trace, FAST_GZIP_LEVEL)
        return _show(trace, shell, pictures, budget, saved_path, chrome.result if chrome else None)


def _show(
    trace: Trace,
    shell: Any,
    pictures: bool,
    budget: int,
    saved_path: Optional[str],
    chrome: Optional[Callable[[], bytes]],
) -> int:
    from IPython.display import display

    from recfn.notebook_ext.fallback import fallback_html

    widget = make_widget(trace, shell) if pictures else None
    summary_handle = None
    used = 0
    if widget is not None:
        header = {"text/html": header_html(trace), "text/plain": header_text(trace)}
        summary_handle = display(header, raw=True, display_id=True)  # type: ignore[no-untyped-call]
        view = widget_bundle(widget)
        view["text/plain"] = f"<recfn view of {trace.name}>"
        view["text/html"] = ""  # where the widget cannot show: the stand-in below speaks
        display(view, raw=True)  # type: ignore[no-untyped-call]
        used += bundle_size(view)
        widget.fill_summary()  # the pane's table, once the timeline is on its way
    summary = {"text/html": trace_html(trace), "text/plain": trace_text(trace)}
    if summary_handle is not None:
        summary_handle.update(summary, raw=True)
    else:
        display(summary, raw=True)  # type: ignore[no-untyped-call]
    used += bundle_size(summary)
    if not pictures:
        return used
    picture: Optional[tuple[dict[str, Any], dict[str, Any]]] = None
    try:
        picture = picture_bundle(*timeline_png(trace))
    except Exception as exc:  # a drawing problem must not hide the captured result
        print(f"recfn: timeline not drawn: {type(exc).__name__}: {exc}", file=sys.stderr)
    if picture is not None and used + bundle_size(picture[0]) > budget:
        print(
            f"recfn: timeline picture left out: over the cell output budget ({budget:,} bytes; "
            "--max-output-bytes)",
            file=sys.stderr,
        )
        picture = None
    room = budget - used - (bundle_size(picture[0]) if picture is not None else 0)
    try:
        stand_in = fallback_html(
            trace,
            room,
            index=getattr(widget, "index", None),
            saved_path=saved_path,
            chrome=chrome,
        )
    except Exception as exc:  # the table is already there; say why this is missing
        print(f"recfn: no HTML view: {type(exc).__name__}: {exc}", file=sys.stderr)
        stand_in = ""
    if stand_in:
        display({"text/html": stand_in}, raw=True)  # type: ignore[no-untyped-call]
        used += utf8_size(stand_in)
    if picture is not None:
        display(picture[0], raw=True, metadata=picture[1])  # type: ignore[no-untyped-call]
        used += bundle_size(picture[0])
    return used
