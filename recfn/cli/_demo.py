"""``recfn demo``: profile a bundled workload (``recfn.cli._workload``), small, quick, and showing
every kind of range. Runs in well under a second."""

from __future__ import annotations

import argparse
import os

from recfn.capture.options import ProfilerConfig
from recfn.cli._common import EXIT_OK, FORCE_HELP, Parser, out, summary_text, write_timeline
from recfn.errors import CLIError


def add_parser(commands: argparse._SubParsersAction[Parser]) -> Parser:
    """The ``demo`` subcommand's parser, added to ``commands`` (the subparsers of ``recfn``)."""
    demo = commands.add_parser(
        "demo",
        help="profile a bundled workload; writes demo.parquet and demo_timeline.png",
        allow_abbrev=False,
    )
    demo.add_argument("--dir", default=".", help="where to write the files (default: here)")
    demo.add_argument("-q", "--quiet", action="store_true", help="print no summary")
    demo.add_argument("--force", action="store_true", help=FORCE_HELP)
    return demo


def run(args: argparse.Namespace) -> int:
    from recfn.cli._workload import workload
    from recfn.notebook_ext.capture import Capture

    if not os.path.isdir(args.dir):
        raise CLIError(f"demo: folder {args.dir!r} does not exist")
    trace_path = os.path.join(args.dir, "demo.parquet")
    image_path = os.path.join(args.dir, "demo_timeline.png")
    config = ProfilerConfig(report_input_shapes=True, with_flops=True)
    capture = Capture("demo", config, range_name="__main__")
    with capture:
        workload()
    trace = capture.trace
    assert trace is not None
    trace.save(trace_path, overwrite=args.force)
    write_timeline(trace, image_path, overwrite=args.force)
    if not args.quiet:
        out(summary_text(trace, 12))
    out(f"recfn: wrote {trace_path} and {image_path}")
    out(
        f"next: recfn summary {trace_path} | recfn timeline {trace_path} -o t.png | "
        f"recfn convert {trace_path} -o demo.json"
    )
    return EXIT_OK
