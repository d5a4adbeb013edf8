"""How a comparison of runs looks in a notebook: its table with a change bar and interval per
row, and a differential flame view (call paths of the candidate, width its time per run, colour
its change), as plain HTML and inline SVG within an output budget.

``comparison_html`` is ``Comparison._repr_html_`` (``trace.compare(...)`` in a cell);
``show_comparison`` is what the magic's ``--compare VAR_OR_PATH`` publishes.
"""

from __future__ import annotations

import html
import math
import sys
from typing import Any

from recfn.notebook_ext.fallback import DEFAULT_OUTPUT_BUDGET

COMPARE_RESERVE = 300_000
"""Bytes of the magic's output budget kept for the comparison when ``--compare`` is given."""

MAX_ROWS = 40
"""Table rows shown; the rest are counted."""

FLAME_WIDTH = 960
FLAME_ROW = 18
MIN_FRAME_PX = 1.0
"""Frames narrower than this are not drawn."""

BAR_WIDTH = 160
"""Pixels of a row's change bar; the scale is shared by the rows (the largest bound shown,
at least 5%, at most 100%)."""

COLORS = {
    "slower": (214, 39, 40),
    "faster": (31, 119, 180),
    "unchanged": (190, 190, 190),
    "not enough data": (238, 221, 130),
}

_STYLE = (
    "<style>"
    ".recfn-compare{font-family:sans-serif;font-size:12px}"
    ".recfn-compare .head{font-family:monospace;margin:0 0 4px 0}"
    "table.recfn-cmp td,table.recfn-cmp th{padding:1px 6px;text-align:right;white-space:nowrap}"
    "table.recfn-cmp td:first-child,table.recfn-cmp th:first-child{text-align:left}"
    "table.recfn-cmp td.slower{color:#b00020;font-weight:bold}"
    "table.recfn-cmp td.faster{color:#1f5fa0;font-weight:bold}"
    "</style>"
)


def comparison_html(
    comparison: Any, budget: int = DEFAULT_OUTPUT_BUDGET, flame: bool = True
) -> str:
    """The comparison as HTML: header, table with change bars, common shift, notes, then the
    differential flame view when there is room left in `budget` bytes (and call paths to draw:
    ``comparison.paths``, computed here from the runs when missing)."""
    parts = [
        _STYLE,
        '<div class="recfn-compare">',
        f'<div class="head"><b>{_text(comparison.describe())}</b></div>',
        _table_html(comparison),
        f"<div>{_text(comparison.shift_text())}</div>",
        *(f"<div><i>{_text(note)}</i></div>" for note in comparison.notes),
    ]
    used = sum(len(p.encode()) for p in parts) + 6
    if flame:
        room = budget - used - 200
        parts.append(_flame_or_note(comparison, room))
    parts.append("</div>")
    return "".join(parts)


def show_comparison(comparison: Any, budget: int) -> int:
    """Publish `comparison` (HTML, and its text table for terminals) within `budget` bytes;
    returns the bytes published."""
    from IPython.display import display

    text = comparison.to_text(top=MAX_ROWS)
    bundle = {
        "text/html": comparison_html(comparison, budget - len(text.encode())),
        "text/plain": text,
    }
    display(bundle, raw=True)  # type: ignore[no-untyped-call]
    return sum(len(value.encode()) for value in bundle.values())


def resolve_baseline(source: str, user_ns: dict[str, Any]) -> Any:
    """``--compare``'s value: a variable of the notebook (a Trace, a DataFrame, a list of them,
    a path) when one has that name, else a path."""
    if source.isidentifier() and source in user_ns:
        return user_ns[source]
    return source


# -- table ------------------------------------------------------------------------------------


def _table_html(comparison: Any) -> str:
    table = comparison.table.head(MAX_ROWS)
    bounds = [
        abs(v) for col in ("change_low", "change_high") for v in table[col].tolist() if _finite(v)
    ]
    scale = min(max([0.05, *bounds]), 1.0)
    base, cand = (_text(label) for label in comparison.labels)
    keys = " / ".join(_text(k) for k in comparison.keys)
    head = (
        f"<tr><th>{keys}</th><th>Share</th><th>Calls</th><th>Time/run ({base})</th>"
        f"<th>Time/run ({cand})</th><th>Change</th><th>Interval</th><th>Verdict</th></tr>"
    )
    rows = []
    for key, row in table.iterrows():
        verdict = str(row["verdict"])
        name = " / ".join(map(str, key)) if isinstance(key, tuple) else str(key)
        rows.append(
            "<tr>"
            f"<td>{_text(name)}</td>"
            f"<td>{_share(row['share'])}</td>"
            f"<td>{_calls(row['calls_baseline'], row['calls_candidate'])}</td>"
            f"<td>{_time(row['total_ns_baseline'])}</td>"
            f"<td>{_time(row['total_ns_candidate'])}</td>"
            f"<td>{_signed(row['change'])}</td>"
            f"<td>{_bar(row['change'], row['change_low'], row['change_high'], verdict, scale)}</td>"
            f'<td class="{verdict.replace(" ", "-")}">{_text(verdict)}</td>'
            "</tr>"
        )
    more = len(comparison.table) - len(table)
    tail = f"<div>{more:,} more rows</div>" if more > 0 else ""
    return f'<table class="recfn-cmp">{head}{"".join(rows)}</table>{tail}'


def _bar(change: Any, low: Any, high: Any, verdict: str, scale: float) -> str:
    """A bar from 0 to the change and a whisker over its interval, on a shared scale."""
    width, height, mid = BAR_WIDTH, 12, BAR_WIDTH / 2

    def x(value: float) -> float:
        return mid + max(-1.0, min(1.0, value / scale)) * (mid - 2)

    pieces = [f'<line x1="{mid}" y1="0" x2="{mid}" y2="{height}" stroke="#888"/>']
    if _finite(change):
        left, right = sorted((x(0.0), x(float(change))))
        red, green, blue = COLORS.get(verdict, COLORS["unchanged"])
        fill = f"rgb({red},{green},{blue})"
        pieces.append(
            f'<rect x="{left:.1f}" y="3" width="{max(right - left, 1):.1f}" height="6" fill="{fill}"/>'
        )
    if _finite(low) and _finite(high):
        a, b = x(float(low)), x(float(high))
        pieces.append(f'<line x1="{a:.1f}" y1="6" x2="{b:.1f}" y2="6" stroke="#333"/>')
        pieces += [
            f'<line x1="{v:.1f}" y1="2" x2="{v:.1f}" y2="10" stroke="#333"/>' for v in (a, b)
        ]
        label = f"{_signed(low)} to {_signed(high)}"
    else:
        label = "-"
    return (
        f'<svg width="{width}" height="{height}" role="img" aria-label="{label}">'
        f"<title>{label}</title>{''.join(pieces)}</svg> {label}"
    )


# -- flame -------------------------------------------------------------------------------------


def _flame_or_note(comparison: Any, room: int) -> str:
    if room < 2_000:
        return "<div><i>differential flame view left out: over the output budget</i></div>"
    paths = comparison.paths
    if paths is None and comparison.sources is not None:
        from recfn.analysis.runsets import compare_paths
        from recfn.errors import RecfnError

        try:
            base, cand = comparison.sources
            paths = comparison.paths = compare_paths(
                base, cand, comparison.labels, **(comparison.options or {})
            )
        except RecfnError as exc:
            return f"<div><i>differential flame view left out: {_text(str(exc))}</i></div>"
    if paths is None:
        return ""
    try:
        return flame_svg(paths, room)
    except Exception as exc:  # the table is there already; say why the picture is not
        print(f"recfn: no flame view: {type(exc).__name__}: {exc}", file=sys.stderr)
        return ""


def flame_svg(paths: Any, budget: int) -> str:
    """The differential flame view of a per-path comparison as inline SVG of at most `budget`
    bytes: the candidate's call paths as an icicle (roots on top), each frame's width its time
    per run in the candidate, its colour the path's change (red slower, blue faster, grey
    unchanged, yellow not enough data: new paths, or too few calls), deeper red or blue for
    larger changes; a tooltip per frame. Frames narrower than a pixel, and the narrowest when
    over budget, are left out."""
    from recfn.analysis.runsets import PATH_SEPARATOR

    table = paths.table
    width_of: dict[str, float] = {}
    info: dict[str, Any] = {}
    for key, row in table.iterrows():
        path = str(key[0] if isinstance(key, tuple) else key)
        time = float(row["total_ns_candidate"]) if _finite(row["total_ns_candidate"]) else 0.0
        if time > 0:
            width_of[path] = time
            info[path] = row
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    for path in width_of:
        parent, _, _ = path.rpartition(PATH_SEPARATOR)
        if parent and parent in width_of:
            children.setdefault(parent, []).append(path)
        else:
            roots.append(path)
    total = sum(width_of[r] for r in roots)
    if total <= 0:
        return "<div><i>no call paths to draw</i></div>"
    frames: list[tuple[float, float, int, str]] = []  # x, width (px), depth, path

    def place(path: str, x: float, span: float, depth: int) -> None:
        frames.append((x, span, depth, path))
        kids = sorted(children.get(path, []))
        inner = sum(width_of[k] for k in kids)
        shrink = min(1.0, width_of[path] / inner) if inner else 1.0  # medians do not add up
        at = x
        for kid in kids:
            kid_span = span * width_of[kid] / width_of[path] * shrink
            if kid_span >= MIN_FRAME_PX:
                place(kid, at, kid_span, depth + 1)
            at += kid_span

    at = 0.0
    for root in sorted(roots):
        span = FLAME_WIDTH * width_of[root] / total
        if span >= MIN_FRAME_PX:
            place(root, at, span, 0)
        at += span
    drawn = sorted(frames, key=lambda f: -f[1])
    pieces: list[str] = []
    size = 600
    for x, span, depth, path in drawn:
        piece = _frame(x, span, depth, path, info[path])
        if size + len(piece.encode()) > budget:
            break
        pieces.append(piece)
        size += len(piece.encode())
    depth = max((f[2] for f in drawn[: len(pieces)]), default=0) + 1
    height = depth * FLAME_ROW
    left_out = len(frames) - len(pieces)
    caption = (
        "differential flame view: width = time per run in the candidate, colour = change "
        "(red slower, blue faster, grey unchanged, yellow not enough data)"
        + (f"; {left_out:,} narrow frames left out" if left_out else "")
    )
    return (
        f"<div><b>{_text(caption)}</b></div>"
        f'<svg width="{FLAME_WIDTH}" height="{height}" viewBox="0 0 {FLAME_WIDTH} {height}" '
        f'font-family="sans-serif" font-size="11" role="img" aria-label="{_text(caption)}">'
        + "".join(pieces)
        + "</svg>"
    )


def _frame(x: float, span: float, depth: int, path: str, row: Any) -> str:
    from recfn.analysis.runsets import PATH_SEPARATOR

    verdict = str(row["verdict"])
    change = row["change"]
    red, green, blue = COLORS.get(verdict, COLORS["unchanged"])
    if verdict in ("slower", "faster") and _finite(change):
        strength = min(abs(float(change)) / 0.25, 1.0) * 0.6 + 0.4  # deeper for larger changes
        red, green, blue = (int(255 - (255 - c) * strength) for c in (red, green, blue))
    name = path.rpartition(PATH_SEPARATOR)[2]
    tip = (
        f"{path.replace(PATH_SEPARATOR, ' > ')}\n{_signed(change)} "
        f"[{_signed(row['change_low'])}, {_signed(row['change_high'])}] {verdict}; "
        f"{_time(row['total_ns_candidate'])}/run (was {_time(row['total_ns_baseline'])})"
    )
    y = depth * FLAME_ROW
    label = ""
    if span > 30:
        shown = (
            name if len(name) * 6.5 < span - 4 else name[: max(int((span - 4) / 6.5) - 1, 0)] + "…"
        )
        label = f'<text x="{x + 2:.1f}" y="{y + 12}">{_text(shown)}</text>'
    return (
        f'<g><title>{_text(tip)}</title><rect x="{x:.1f}" y="{y}" width="{max(span - 0.5, 0.5):.1f}" '
        f'height="{FLAME_ROW - 1}" fill="rgb({red},{green},{blue})"/>{label}</g>'
    )


# -- cells -------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    from recfn.analysis.units import printable

    return html.escape(printable(str(value)))


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _signed(value: Any) -> str:
    return f"{float(value):+.1%}" if _finite(value) else "-"


def _share(value: Any) -> str:
    return f"{float(value):.1%}" if _finite(value) else "-"


def _time(value: Any) -> str:
    from recfn.analysis.units import format_ns

    return format_ns(float(value)) if _finite(value) else "-"


def _calls(base: Any, cand: Any) -> str:
    shown = [f"{float(v):,.0f}" if _finite(v) else "-" for v in (base, cand)]
    return shown[0] if shown[0] == shown[1] else f"{shown[0]} → {shown[1]}"
