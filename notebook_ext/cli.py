"""The ``recfn`` command line (also ``python -m recfn``).

    recfn run script.py [args...] [-o trace.parquet] [--timeline out.png] [capture options]
    recfn summary TRACE          recfn timeline TRACE -o out.png
    recfn convert IN -o OUT      recfn diff BASELINE CURRENT
    recfn demo                   recfn codegen ...

The capture options (``--shapes``, ``--trace-calls``, ``--max-events N``, ...) are generated from
``recfn.ProfilerConfig`` (notebook_ext/options.py), as for ``%%record_function``. ``-o/--output``
names a file to write, or a folder (ending in ``/`` or existing) for a streamed dataset. With
``--flight-recorder N`` only the last N events are kept, and written to ``-o`` at the end, or when
the script raises (to ``recfn-flight-<pid>.parquet`` without ``-o``) or gets SIGUSR1.

User mistakes (missing files, files that are not traces, bad options) end with one line on
stderr, ``recfn: error: <file>: <what is wrong>``, and a non-zero exit, never a traceback. Any
other exception also ends with one line (``RECFN_DEBUG=1`` adds its traceback). Exit codes:
0 success, 1 failure or bad input, 2 bad usage; ``run`` exits with the script's own code (130
when interrupted), and shows the script's own exceptions as Python would.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import traceback
import types
import warnings
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Optional

from recfn.errors import TraceFormatError
from recfn.notebook_ext.options import (
    ZERO_ANNOTATION_DEPTH,
    OptionError,
    add_capture_options,
    front_end_config,
    split_options,
)
from recfn.options import ProfilerConfig

PROG = "recfn"
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130
DEBUG_ENV = "RECFN_DEBUG"
"""``RECFN_DEBUG=1`` prints the traceback of an unexpected error before its one-line message."""
IMAGE_SUFFIXES = (".png", ".svg", ".pdf")
SORT_KEYS = {"total": "total_ns", "self": "self_ns", "mean": "mean_ns", "max": "max_ns",
             "min": "min_ns", "count": "count", "calls": "count"}  # fmt: skip


class CLIError(Exception):
    """A user mistake: reported as ``recfn: error: <message>`` with ``code``."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so main() owns every exit."""

    def error(self, message: str) -> Any:
        command = self.prog[len(PROG) :].strip()
        where = f"{command}: " if command else ""
        raise CLIError(f"{where}{message} (see {self.prog} --help)", EXIT_USAGE)


# -- parsers ---------------------------------------------------------------------------------


LARGE_ROWS = 1_000_000
"""``recfn summary`` of one Parquet file with this many events runs out of core."""
FORCE_HELP = "replace an existing file even if recfn did not write it"


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        metavar="TRACE",
        help="write the trace (.parquet, or Chrome .json/.json.gz); a folder (ending in / or "
        "existing) gets a Parquet dataset streamed as the script runs, with one folder per "
        "process: child processes (multiprocessing, process pools) are followed",
    )
    parser.add_argument(
        "--timeline", metavar="IMAGE", help="also render the timeline (.png/.svg/.pdf)"
    )
    parser.add_argument(
        "--top", type=int, default=15, metavar="N", help="summary rows (default 15)"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print no summary")
    parser.add_argument("--force", action="store_true", help=FORCE_HELP)


def build_parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="Profile Python programs with recfn ranges; inspect, plot, convert and "
        "compare traces.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="store_true", help="print the recfn version")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = commands.add_parser(
        "run",
        help="profile a Python script",
        description="Run SCRIPT with ARGS under the recfn profiler: its __main__ in a USER_SCOPE "
        "range, plus every range it records. recfn's options may come before or after the "
        "script; put `--` before script arguments that collide with them. Without a trace flag, "
        f"calls are traced {ZERO_ANNOTATION_DEPTH} deep (--no-trace-calls: only the script's "
        "own ranges; --trace-calls: every depth).",
        allow_abbrev=False,
    )
    _add_run_options(run)
    add_capture_options(run.add_argument_group("capture options (as recfn.profile's)"))
    run.add_argument("script", help="the Python file to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")

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
        "--width", type=float, default=12.0, metavar="INCHES", help="figure width (default 12)"
    )
    timeline.add_argument("--title", help="figure title (default: the file name)")
    timeline.add_argument(
        "--align-clocks",
        metavar="MARK",
        help="line up the hosts' clocks on the marks named MARK that every process recorded "
        'at the same moment (recfn.load(..., clock_offsets="MARK"))',
    )
    timeline.add_argument("--force", action="store_true", help=FORCE_HELP)

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
    convert.add_argument("--force", action="store_true", help=FORCE_HELP)

    diff = commands.add_parser(
        "diff", help="how a trace changed from a baseline, per name", allow_abbrev=False
    )
    diff.add_argument("baseline", help="the baseline trace")
    diff.add_argument("current", help="the trace compared with it (changes: current - baseline)")
    diff.add_argument("--top", type=int, default=20, metavar="N", help="rows (default 20)")

    demo = commands.add_parser(
        "demo",
        help="profile a bundled workload; writes demo.parquet and demo_timeline.png",
        allow_abbrev=False,
    )
    demo.add_argument("--dir", default=".", help="where to write the files (default: here)")
    demo.add_argument("-q", "--quiet", action="store_true", help="print no summary")
    demo.add_argument("--force", action="store_true", help=FORCE_HELP)

    commands.add_parser(
        "codegen", help="generate recfn instrumentation (recfn codegen --help)", add_help=False
    )
    return parser


# -- helpers ---------------------------------------------------------------------------------


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _load(path: Any, clock_offsets: Any = None) -> Any:
    from recfn.trace import load

    return load(path) if clock_offsets is None else load(path, clock_offsets=clock_offsets)


def _check_image_path(path: str, what: str) -> str:
    if not path.lower().endswith(IMAGE_SUFFIXES):
        raise CLIError(f"{what}: {path!r} must end in {', '.join(IMAGE_SUFFIXES)}", EXIT_USAGE)
    _check_folder(path, what)
    return path


def _check_folder(path: str, what: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"{what}: folder {folder!r} does not exist")
    if os.path.isdir(path):
        raise CLIError(f"{what}: {path!r} is a folder")


def _check_trace_path(path: str, what: str) -> str:
    from recfn.notebook_ext.capture import CaptureError, check_output_path

    try:
        return check_output_path(path, what)
    except CaptureError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None


def _positive(value: Optional[int], what: str) -> None:
    if value is not None and value <= 0:
        raise CLIError(f"{what} must be a positive integer, got {value}", EXIT_USAGE)


def _summary_text(trace: Any, top: int, **kwargs: Any) -> str:
    from recfn.notebook_ext.display import table_text

    return table_text(trace, top, **kwargs)


def _write_timeline(
    trace: Any,
    path: str,
    width: float = 12.0,
    title: Optional[str] = None,
    max_depth: Optional[int] = None,
    overwrite: bool = False,
) -> None:
    from recfn._files import write_atomic
    from recfn.notebook_ext.display import header_text, new_figure

    fig = new_figure(trace.threads, width)
    ax = fig.add_subplot()
    kwargs: dict[str, Any] = {"title": title or header_text(trace)}
    if max_depth is not None:
        kwargs["max_depth"] = max_depth
    trace.to_pandas().recfn.timeline(ax=ax, **kwargs)
    suffix = os.path.splitext(path)[1].lower().lstrip(".")
    metadata = {"Software": "recfn"} if suffix == "png" else {"Creator": "recfn"}
    write_atomic(
        path,
        lambda temporary: fig.savefig(
            temporary, format=suffix, dpi=110, bbox_inches="tight", metadata=metadata
        ),
        overwrite=overwrite,
    )


# -- commands --------------------------------------------------------------------------------


def cmd_run(parser: _Parser, argv: Sequence[str]) -> int:
    from recfn.notebook_ext.capture import Capture

    run_parser = _subparser(parser, "run")
    try:
        own, rest, _ = split_options(run_parser, argv, interleaved=True)
    except ValueError as exc:
        raise CLIError(f"run: {exc} (see recfn run --help)", EXIT_USAGE) from None
    if any(token in ("-h", "--help") for token in own):
        run_parser.print_help()
        return EXIT_OK
    if not rest:
        raise CLIError(
            "run: which script? usage: recfn run script.py [args...] -o trace.parquet", EXIT_USAGE
        )
    script, script_args = rest[0], rest[1:]
    args = run_parser.parse_args([*own, script])
    if not os.path.exists(script):
        raise CLIError(f"run: no such script: {script!r}")
    if os.path.isdir(script) and not os.path.exists(os.path.join(script, "__main__.py")):
        raise CLIError(f"run: {script!r} is a folder without __main__.py")
    dataset = _dataset_folder(args.output)
    if args.output is not None and dataset is None:
        _check_trace_path(args.output, "-o")
    if args.timeline is not None:
        _check_image_path(args.timeline, "--timeline")
    _positive(args.top, "--top")
    try:
        config = front_end_config(args)
    except OptionError as exc:
        raise CLIError(f"run: {exc}", EXIT_USAGE) from None

    capture = Capture(
        os.path.basename(os.path.abspath(script)),
        config,
        range_name="__main__",
        dataset=dataset,
        output_file=args.output if dataset is None else None,
    )
    with warnings.catch_warnings():  # said below, once, without a source line
        warnings.filterwarnings("ignore", "recfn: flight recorder wrote", RuntimeWarning)
        code = _run_script(capture, script, script_args)
    for path in capture.dumps:
        sys.stderr.write(
            f"recfn: flight recorder wrote its last {config.flight_recorder} events to {path}\n"
        )
    trace = capture.trace
    if trace is None:
        return code
    if dataset is not None:
        return _report_dataset(dataset, args, code)
    if not args.quiet:
        sys.stdout.flush()
        sys.stderr.write(_summary_text(trace, args.top) + "\n")
    if args.output is not None and args.output not in capture.dumps:
        trace.save(args.output, overwrite=args.force)
        sys.stderr.write(f"recfn: wrote {args.output}\n")
    elif not args.quiet:
        sys.stderr.write("recfn: trace not saved (use -o trace.parquet to keep it)\n")
    if args.timeline is not None:
        _write_timeline(trace, args.timeline, overwrite=args.force)
        sys.stderr.write(f"recfn: wrote {args.timeline}\n")
    return code


def _dataset_folder(output: Optional[str]) -> Optional[str]:
    """``output`` when it names a folder for a dataset (``capture.dataset_folder``)."""
    from recfn.notebook_ext.capture import CaptureError, dataset_folder

    try:
        return None if output is None else dataset_folder(output, "-o")
    except CaptureError as exc:
        raise CLIError(str(exc)) from None


def _report_dataset(folder: str, args: argparse.Namespace, code: int) -> int:
    """The summary of every process's parts in ``folder`` (out of core when it can be)."""
    trace = _load(folder)
    if not args.quiet:
        sys.stdout.flush()
        text = _files_summary_text(trace, ["name"], args.top, "total_ns")
        sys.stderr.write((text if text is not None else _summary_text(trace, args.top)) + "\n")
    sys.stderr.write(f"recfn: wrote {len(trace.files)} parts into {folder}\n")
    if args.timeline is not None:
        _write_timeline(trace, args.timeline, overwrite=args.force)
        sys.stderr.write(f"recfn: wrote {args.timeline}\n")
    return code


def _run_script(capture: Any, script: str, script_args: list[str]) -> int:
    """Run ``script`` as ``__main__`` inside ``capture``; return the exit code Python would."""
    path = os.path.abspath(script)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script, *script_args]
    sys.path.insert(0, path if os.path.isdir(path) else os.path.dirname(path))
    try:
        if os.path.isdir(path):
            with capture:
                runpy.run_path(path, run_name="__main__")
        else:
            _run_file(capture, path)
        return EXIT_OK
    except SystemExit as exc:
        return _exit_code(exc.code)
    except KeyboardInterrupt:
        sys.stderr.write("recfn: interrupted; keeping what was captured\n")
        return EXIT_INTERRUPTED
    except BaseException as exc:  # the script's own error: show it as Python would
        _print_script_traceback(exc, path)
        return EXIT_FAILURE
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def _run_file(capture: Any, path: str) -> None:
    """``runpy.run_path`` for a file, its reading and compiling done before the capture starts,
    so traced calls begin at the script's own code."""
    with open(path, "rb") as source:
        code = compile(source.read(), path, "exec")
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=path, __cached__=None, __loader__=None, __package__=None)
    module.__dict__["__spec__"] = None
    saved_main = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        with capture:
            exec(code, module.__dict__)
    finally:
        if saved_main is not None:
            sys.modules["__main__"] = saved_main


def _exit_code(code: object) -> int:
    if code is None:
        return EXIT_OK
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return EXIT_FAILURE


def _print_script_traceback(exc: BaseException, script_path: str) -> None:
    """The traceback from the script's first frame on (runpy's and recfn's frames dropped)."""
    tb: Optional[TracebackType] = exc.__traceback__
    here = os.path.dirname(os.path.abspath(__file__))
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        filename = filename if filename.startswith("<") else os.path.abspath(filename)
        if filename == script_path or not (filename.startswith(here) or "runpy" in filename):
            break
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def cmd_summary(args: argparse.Namespace) -> int:
    _positive(args.top, "--top")
    sources = list(args.trace)
    large = _large_parquet(sources[0]) if len(sources) == 1 and not args.shapes else None
    trace = large if large is not None else _load(sources[0] if len(sources) == 1 else sources)
    keys = [key.strip() for key in args.by.split(",") if key.strip()]
    if not keys:
        raise CLIError("summary: --by needs a column", EXIT_USAGE)
    if trace.files and not args.shapes:
        text = _files_summary_text(trace, keys, args.top, SORT_KEYS[args.sort])
        if text is not None:
            _out(text)
            return EXIT_OK
    missing = [key for key in keys if key not in trace.table.column_names]
    if missing:
        where = ", ".join(map(repr, sources))
        raise CLIError(f"summary: no column {missing[0]!r} in {where}", EXIT_USAGE)
    _out(
        _summary_text(
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
    from recfn.trace import Trace

    if not path.lower().endswith((".parquet", ".pq")) or not os.path.isfile(path):
        return None
    trace = Trace.from_files([path], name=os.path.basename(path))
    try:
        rows = int(trace.footers(path).num_rows)
    except Exception:  # not readable as Parquet: the ordinary load names what is wrong
        return None
    return trace if rows >= LARGE_ROWS else None


def _files_summary_text(trace: Any, keys: list[str], top: int, sort_by: str) -> Optional[str]:
    """The summary of a trace of many files computed out of core, or None when it cannot
    be (Chrome files, a grouping without name)."""
    from recfn.analysis.outofcore import summarize_files, supports
    from recfn.analysis.summary import render_text
    from recfn.dataset import unfinished

    options = {"by": keys, "sort_by": sort_by, "top": top}
    if not supports(trace.files, options):
        return None
    try:
        result = summarize_files(
            trace.files, keys, sort_by=sort_by, top=top, as_index=False, footers=trace.footers
        )
    except ValueError as exc:
        raise CLIError(f"summary: {exc}", EXIT_USAGE) from None
    header = _files_header(trace, result.attrs["events"])
    for folder in unfinished(trace.files, trace.footers):
        header += (
            f"\n{folder}: this process never stopped its profile (killed?), so what it recorded"
            " after its last part is missing"
        )
    return f"{header}\n{render_text(result, keys, result.attrs['self_total_ns'])}"


def _files_header(trace: Any, ranges: int) -> str:
    """The header of an out-of-core summary, from the files' footers alone: name, wall time
    (when the files recorded it), processes and files, ranges, dropped events."""
    from recfn.analysis.outofcore import partitions
    from recfn.dataset import in_process_folder
    from recfn.notebook_ext.display import format_ns
    from recfn.schema import WALL_NS_KEY

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
    return " · ".join(parts)


def cmd_timeline(args: argparse.Namespace) -> int:
    output = args.output or _default_image(args.trace)
    _check_image_path(output, "-o")
    if args.width <= 0:
        raise CLIError(f"--width must be positive, got {args.width}", EXIT_USAGE)
    _positive(args.max_depth if args.max_depth != 0 else None, "--max-depth")
    trace = _load(args.trace, clock_offsets=args.align_clocks)
    if args.align_clocks is not None:
        try:
            trace.table  # noqa: B018  (reads the files and estimates the offsets now)
        except ValueError as exc:
            raise CLIError(f"--align-clocks: {exc}") from None
    _write_timeline(
        trace,
        output,
        width=args.width,
        title=args.title,
        max_depth=args.max_depth,
        overwrite=args.force,
    )
    _out(f"recfn: wrote {output}")
    return EXIT_OK


def _default_image(trace_path: str) -> str:
    base = os.path.basename(trace_path)
    for suffix in (".json.gz", ".json", ".parquet", ".pq"):
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
            break
    return f"{base}_timeline.png"


def cmd_convert(args: argparse.Namespace) -> int:
    if args.output is not None and args.output_option is not None:
        raise CLIError("convert: give the output once, as OUTPUT or as -o OUTPUT", EXIT_USAGE)
    args.output = args.output or args.output_option
    if args.output is None:
        raise CLIError("convert: which file to write? recfn convert IN -o OUT", EXIT_USAGE)
    if os.path.abspath(args.input) == os.path.abspath(args.output):
        raise CLIError(
            "convert: the output would overwrite the input; choose another name", EXIT_USAGE
        )
    _check_trace_path(args.output, "convert")
    trace = _load(args.input)
    _announce_size(trace, args.output)
    trace.save(args.output, overwrite=args.force)
    _out(f"recfn: wrote {args.output} ({trace.events:,} events)")
    return EXIT_OK


def _announce_size(trace: Any, output: str) -> None:
    """Say how large a Chrome JSON output will be when that is above
    ``recfn.chrome.LARGE_JSON_BYTES`` (an estimate from a sample of rows)."""
    from recfn import chrome
    from recfn.io import CHROME, trace_format

    if trace_format(output) != CHROME:
        return
    compressed = output.lower().endswith(".gz")
    size = chrome.estimate_chrome_bytes(trace.table, compressed=compressed)
    if size > chrome.LARGE_JSON_BYTES:
        sys.stderr.write(
            f"recfn: {output} will take about {size / 2**30:,.1f} GiB "
            f"({'gzip-compressed ' if compressed else ''}Chrome JSON, estimated); writing...\n"
        )


def cmd_diff(args: argparse.Namespace) -> int:
    import pandas as pd

    _positive(args.top, "--top")
    baseline, current = _load(args.baseline), _load(args.current)
    table = current.diff(baseline)
    if args.top is not None:
        table = table.head(args.top)
    from recfn.notebook_ext.display import summary_for_display

    _out(f"baseline: {baseline.header()}\ncurrent:  {current.header()}")
    if len(table) == 0:
        _out("no ranges to compare")
        return EXIT_OK
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        _out(summary_for_display(table).to_string(index=False))
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from recfn.notebook_ext.capture import Capture
    from recfn.notebook_ext.demo import workload

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
    _write_timeline(trace, image_path, overwrite=args.force)
    if not args.quiet:
        _out(_summary_text(trace, 12))
    _out(f"recfn: wrote {trace_path} and {image_path}")
    _out(
        f"next: recfn summary {trace_path} | recfn timeline {trace_path} -o t.png | "
        f"recfn convert {trace_path} -o demo.json"
    )
    return EXIT_OK


def cmd_codegen(argv: Sequence[str]) -> int:
    """``recfn codegen ...``: handed to ``recfn.codegen.main`` (imported only when asked for)."""
    import importlib
    import importlib.util

    if importlib.util.find_spec("recfn.codegen") is None:
        raise CLIError("codegen is not available in this recfn install (recfn.codegen is missing)")
    codegen = importlib.import_module("recfn.codegen")
    try:
        result = codegen.main(list(argv))
    except SystemExit as exc:  # argparse's --help and usage errors inside codegen
        return _exit_code(exc.code)
    return int(result or 0)


def _subparser(parser: argparse.ArgumentParser, name: str) -> _Parser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub: _Parser = action.choices[name]
            return sub
    raise KeyError(name)


# -- entry point -----------------------------------------------------------------------------

USER_ERRORS: tuple[type[BaseException], ...] = (
    TraceFormatError, FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError,
    PermissionError,
    json.JSONDecodeError,
)  # fmt: skip


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``recfn`` command line; returns the exit code (the console script exits with it)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(args_list)
    except CLIError as exc:
        _error(str(exc))
        return exc.code
    except USER_ERRORS as exc:
        _error(_describe(exc))
        return EXIT_FAILURE
    except BrokenPipeError:  # `recfn summary t.parquet | head`
        _silence_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # a recfn bug or an input no check foresaw: still one line
        if os.environ.get(DEBUG_ENV) == "1":
            traceback.print_exc()
        _error(
            f"unexpected {type(exc).__name__}: {_describe(exc)} "
            f"(set {DEBUG_ENV}=1 for the traceback, and please report it)"
        )
        return EXIT_FAILURE


def _dispatch(argv: list[str]) -> int:
    parser = build_parser()
    if argv and argv[0] == "codegen":
        return cmd_codegen(argv[1:])
    if argv and argv[0] == "run":
        return cmd_run(parser, argv[1:])
    if not argv:
        parser.print_help()
        return EXIT_USAGE
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help
        return _exit_code(exc.code)
    if args.version:
        from recfn import __version__

        _out(f"recfn {__version__}")
        return EXIT_OK
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "summary": cmd_summary,
        "timeline": cmd_timeline,
        "convert": cmd_convert,
        "diff": cmd_diff,
        "demo": cmd_demo,
    }
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    return handlers[args.command](args)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.strerror}: {exc.filename!r}"
    return str(exc) or type(exc).__name__


def _error(message: str) -> None:
    message = " ".join(message.split())  # one line, whatever the exception said
    sys.stderr.write(f"{PROG}: error: {message}\n")


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
