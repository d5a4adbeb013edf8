"""``recfn diff BASELINE CURRENT``: how a trace changed from a baseline, per name."""

from __future__ import annotations

import argparse

from recfn.cli._common import EXIT_OK, Parser, check_positive, load_trace, out


def add_parser(commands: argparse._SubParsersAction[Parser]) -> Parser:
    """The ``diff`` subcommand's parser, added to ``commands`` (the subparsers of ``recfn``)."""
    diff = commands.add_parser(
        "diff", help="how a trace changed from a baseline, per name", allow_abbrev=False
    )
    diff.add_argument("baseline", help="the baseline trace")
    diff.add_argument("current", help="the trace compared with it (changes: current - baseline)")
    diff.add_argument("--top", type=int, default=20, metavar="N", help="rows (default 20)")
    return diff


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    check_positive(args.top, "--top")
    baseline, current = load_trace(args.baseline), load_trace(args.current)
    table = current.diff(baseline)
    if args.top is not None:
        table = table.head(args.top)
    from recfn.notebook_ext.display import summary_for_display

    out(f"baseline: {baseline.header()}\ncurrent:  {current.header()}")
    if len(table) == 0:
        out("no ranges to compare")
        return EXIT_OK
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        out(summary_for_display(table).to_string(index=False))
    return EXIT_OK
