"""``recfn summary TRACE...``: the summary table of traces, out of core for datasets and large files."""

from __future__ import annotations

import argparse
import os
from typing import Any, Optional

from recfn.cli._common import (
    EXIT_OK,
    EXIT_USAGE,
    Parser,
    check_positive,
    load_trace,
    out,
    summary_text,
)
from recfn.errors import CLIError, TraceFormatError

SORT_KEYS = {"total": "total_ns", "self": "self_ns", "mean": "mean_ns", "max": "max_ns",
             "min": "min_ns", "count": "count", "calls": "count"}  # fmt: skip

LARGE_ROWS = 1_000_000
"""``recfn summary`` of one Parquet file with this many events runs out of core."""


def add_parser(commands: argparse._SubParsersAction[Parser]) -> Parser:
    """The ``summary`` subcommand's parser, added to ``commands`` (the subparsers of ``recfn``)."""
    summary = commands.add_parser(
        "summary", help="print the summary table of a trace", allow_abbrev=False
    )
    summary.add_argument(
        "trace",
        nargs="+",
        help="recfn Parquet or Chrome JSON traces, or folders of them (a dataset written by "
        "profile(output=...)): summarised together",
    )
    summary.add_argument("--top", type=int, default=20, metavar="N", help="rows (default 20)")
    summary.add_argument(
        "--by",
        default="name",
        metavar="COLUMN[,COLUMN]",
        help="group by (default name; rank,name: per rank)",
    )
    summary.add_argument(
        "--sort", default="total", choices=sorted(SORT_KEYS), help="sort key (default total)"
    )
    summary.add_argument("--shapes", action="store_true", help="group by input shape too")
    return summary


def run(args: argparse.Namespace) -> int:
    check_positive(args.top, "--top")
    sources = list(args.trace)
    large = _large_parquet(sources[0]) if len(sources) == 1 and not args.shapes else None
    trace = large if large is not None else load_trace(sources[0] if len(sources) == 1 else sources)
    keys = [key.strip() for key in args.by.split(",") if key.strip()]
    if not keys:
        raise CLIError("summary: --by needs a column", EXIT_USAGE)
    if trace.files and not args.shapes:
        text = files_summary_text(trace, keys, args.top, SORT_KEYS[args.sort])
        if text is not None:
            out(text)
            return EXIT_OK
    missing = [key for key in keys if key not in trace.table.column_names]
    if missing:
        where = ", ".join(map(repr, sources))
        raise CLIError(f"summary: no column {missing[0]!r} in {where}", EXIT_USAGE)
    out(
        summary_text(
            trace,
            args.top,
            by=keys[0] if len(keys) == 1 else keys,
            sort_by=SORT_KEYS[args.sort],
            group_by_input_shape=args.shapes,
        )
    )
    return EXIT_OK


def _large_parquet(path: str) -> Any:
    """A trace of the file ``path``, read lazily, when it is a Parquet file of at least
    ``LARGE_ROWS`` events (from its footer, kept for the summary): summarised out of core,
    column by column, rather than read, verified and held whole; else None."""
    from recfn.formats.trace import Trace

    if not path.lower().endswith((".parquet", ".pq")) or not os.path.isfile(path):
        return None
    trace = Trace.from_files([path], name=os.path.basename(path))
    try:
        rows = int(trace.footers(path).num_rows)
    except Exception:  # not readable as Parquet: the ordinary load names what is wrong
        return None
    return trace if rows >= LARGE_ROWS else None


def files_summary_text(trace: Any, keys: list[str], top: int, sort_by: str) -> Optional[str]:
    """The summary of a trace of many files computed out of core, or None when it cannot
    be (Chrome files, a grouping without name)."""
    from recfn.analysis.outofcore.files import summarize_files, supports
    from recfn.analysis.stats.summary import render_text
    from recfn.formats.dataset import unfinished_captures

    options = {"by": keys, "sort_by": sort_by, "top": top}
    if not supports(trace.files, options):
        return None
    try:
        result = summarize_files(
            trace.files, keys, sort_by=sort_by, top=top, as_index=False, footers=trace.footers
        )
    except TraceFormatError:
        raise  # a bad file, not a bad option: exit 1 (main says it)
    except ValueError as exc:
        raise CLIError(f"summary: {exc}", EXIT_USAGE) from None
    header = _files_header(trace, result.attrs["events"])
    for capture in unfinished_captures(trace.files, trace.footers):
        header += "\n" + capture.describe()
    return f"{header}\n{render_text(result, keys, result.attrs['self_total_ns'])}"


def _files_header(trace: Any, ranges: int) -> str:
    """The header of an out-of-core summary, from the files' footers alone: name, wall time
    (when the files recorded it), processes and files, ranges, dropped events."""
    from recfn.analysis.outofcore.files import partitions
    from recfn.formats.dataset import in_process_folder
    from recfn.formats.schema import WALL_NS_KEY
    from recfn.notebook_ext.display import format_ns

    files = len(trace.files)
    processes = sum(in_process_folder(group[0]) for group in partitions(trace.files))
    parts = [f"recfn · {trace.name}"]
    wall = trace.metadata.get(WALL_NS_KEY)
    if wall is not None:
        parts.append(f"{format_ns(int(wall))} wall")
    if processes:  # a dataset's process folders
        parts.append(f"{processes} process{'es' if processes != 1 else ''}")
    parts += [
        f"{files} file{'s' if files != 1 else ''}",
        f"{ranges:,} ranges",
        f"{trace.dropped_events:,} dropped",
    ]
    if trace.error:
        parts.append(f"interrupted by {trace.error}")
    return " · ".join(parts)
