"""``recfn timeline TRACE -o out.png``: draw a trace's timeline."""

from __future__ import annotations

import argparse
import os

from recfn.cli._common import (
    EXIT_OK,
    EXIT_USAGE,
    FORCE_HELP,
    Parser,
    check_image_path,
    check_positive,
    load_trace,
    out,
    write_timeline,
)
from recfn.errors import CLIError, RecfnValueError

MAX_WIDTH_INCHES = 500.0
"""The widest figure ``--width`` draws (55,000 pixels at the 110 dpi recfn writes; matplotlib
refuses images of 2^23 pixels and more in a dimension)."""


def add_parser(commands: argparse._SubParsersAction[Parser]) -> Parser:
    """The ``timeline`` subcommand's parser, added to ``commands`` (the subparsers of ``recfn``)."""
    timeline = commands.add_parser(
        "timeline", help="render the timeline of a trace", allow_abbrev=False
    )
    timeline.add_argument("trace", help="a recfn Parquet trace or a Chrome JSON trace")
    timeline.add_argument(
        "-o",
        "--output",
        metavar="IMAGE",
        help="image to write (.png/.svg/.pdf; default <trace>_timeline.png)",
    )
    timeline.add_argument("--max-depth", type=int, metavar="N", help="deepest level drawn")
    timeline.add_argument(
        "--width",
        type=float,
        default=12.0,
        metavar="INCHES",
        help="figure width (default 12; at most 500)",
    )
    timeline.add_argument("--title", help="figure title (default: the file name)")
    timeline.add_argument(
        "--align-clocks",
        metavar="MARK",
        help="line up the hosts' clocks on the marks named MARK that every process recorded "
        'at the same moment (recfn.load(..., clock_offsets="MARK"))',
    )
    timeline.add_argument("--force", action="store_true", help=FORCE_HELP)
    return timeline


def run(args: argparse.Namespace) -> int:
    output = args.output or _default_image(args.trace)
    check_image_path(output, "-o")
    if not 0 < args.width <= MAX_WIDTH_INCHES:  # nan and inf too
        raise CLIError(
            f"--width must be a positive number of inches up to {MAX_WIDTH_INCHES}, "
            f"got {args.width}",
            EXIT_USAGE,
        )
    check_positive(args.max_depth if args.max_depth != 0 else None, "--max-depth")
    if args.align_clocks is not None and not args.align_clocks.strip():
        raise CLIError("--align-clocks needs the name of a mark", EXIT_USAGE)
    try:  # the offsets are estimated as the files are read
        trace = load_trace(args.trace, clock_offsets=args.align_clocks)
        if args.align_clocks is not None:
            trace.table  # noqa: B018  (reads the files and estimates the offsets now)
    except RecfnValueError as exc:  # not a TraceFormatError: a bad file is main's to say
        if args.align_clocks is None:
            raise
        raise CLIError(f"--align-clocks: {exc}") from None
    write_timeline(
        trace,
        output,
        width=args.width,
        title=args.title,
        max_depth=args.max_depth,
        overwrite=args.force,
    )
    out(f"recfn: wrote {output}")
    return EXIT_OK


def _default_image(trace_path: str) -> str:
    base = os.path.basename(trace_path)
    for suffix in (".json.gz", ".json", ".parquet", ".pq"):
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
            break
    return f"{base}_timeline.png"
