"""``recfn convert IN -o OUT``: between Parquet and Chrome JSON, by the output's suffix."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from recfn.cli._common import (
    EXIT_OK,
    EXIT_USAGE,
    FORCE_HELP,
    Parser,
    check_trace_path,
    load_trace,
    out,
)
from recfn.errors import CLIError


def add_parser(commands: argparse._SubParsersAction[Parser]) -> Parser:
    """The ``convert`` subcommand's parser, added to ``commands`` (the subparsers of ``recfn``)."""
    convert = commands.add_parser(
        "convert",
        help="convert between Parquet and Chrome JSON",
        description="Convert a trace by the output's suffix: .parquet/.pq or .json/.json.gz. "
        "Inputs may be recfn traces or Chrome/Perfetto JSON traces (torch.profiler's too).",
        allow_abbrev=False,
    )
    convert.add_argument("input", help="the trace to read")
    convert.add_argument("output", nargs="?", help="the file to write (or -o OUTPUT)")
    convert.add_argument(
        "-o", "--output", dest="output_option", metavar="OUTPUT", help="the file to write"
    )
    convert.add_argument(
        "--split",
        choices=["rank"],
        help="write a Chrome file per rank into the folder OUTPUT (rank-N.json.gz, one time base), "
        "as HTA reads a job",
    )
    convert.add_argument("--force", action="store_true", help=FORCE_HELP)
    return convert


def run(args: argparse.Namespace) -> int:
    if args.output is not None and args.output_option is not None:
        raise CLIError("convert: give the output once, as OUTPUT or as -o OUTPUT", EXIT_USAGE)
    args.output = args.output or args.output_option
    if args.output is None:
        raise CLIError("convert: which file to write? recfn convert IN -o OUT", EXIT_USAGE)
    if os.path.abspath(args.input) == os.path.abspath(args.output):
        raise CLIError(
            "convert: the output would overwrite the input; choose another name", EXIT_USAGE
        )
    if args.split is not None:
        return _split(args)
    check_trace_path(args.output, "convert")
    trace = load_trace(args.input)
    _announce_size(trace, args.output)
    trace.save(args.output, overwrite=args.force)
    out(f"recfn: wrote {args.output} ({trace.events:,} events)")
    return EXIT_OK


def _split(args: argparse.Namespace) -> int:
    """``--split rank``: a Chrome file per rank in the folder ``args.output``."""
    from recfn.errors import RecfnValueError
    from recfn.formats.chrome import write_chrome_ranks

    folder = args.output
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise CLIError(
            f"convert --split: {folder!r} is a file; OUTPUT must be a folder", EXIT_USAGE
        )
    parent = os.path.dirname(os.path.abspath(folder.rstrip("/" + os.sep)))
    if not os.path.isdir(parent):
        raise CLIError(f"convert --split: folder {parent!r} does not exist")
    trace = load_trace(args.input)
    try:
        written = write_chrome_ranks(trace.table, folder, overwrite=args.force)
    except RecfnValueError as exc:
        raise CLIError(f"convert --split rank: {args.input}: {exc}") from None
    out(f"recfn: wrote {len(written)} files to {folder} (one per rank, {trace.events:,} events)")
    return EXIT_OK


def _announce_size(trace: Any, output: str) -> None:
    """Say how large a Chrome JSON output will be when that is above
    ``recfn.formats.chrome.LARGE_JSON_BYTES`` (an estimate from a sample of rows)."""
    from recfn.formats import chrome
    from recfn.formats.io import CHROME, trace_format

    if trace_format(output) != CHROME:
        return
    compressed = output.lower().endswith(".gz")
    size = chrome.estimate_chrome_bytes(trace.table, compressed=compressed)
    if size > chrome.LARGE_JSON_BYTES:
        sys.stderr.write(
            f"recfn: {output} will take about {size / 2**30:,.1f} GiB "
            f"({'gzip-compressed ' if compressed else ''}Chrome JSON, estimated); writing...\n"
        )
