"""``recfn run script.py [args...]``: run a script under the profiler, as the magic profiles a cell."""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback
import types
import warnings
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Optional

from recfn.cli._common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    FORCE_HELP,
    Parser,
    check_image_path,
    check_positive,
    check_trace_path,
    exit_code,
    load_trace,
    subcommand_parser,
    summary_text,
    write_timeline,
)
from recfn.cli._summary import files_summary_text
from recfn.errors import CLIError, OptionError
from recfn.notebook_ext.options import (
    ZERO_ANNOTATION_DEPTH,
    add_capture_options,
    front_end_config,
    split_options,
)


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
    parser.add_argument(
        "--repeat",
        type=int,
        metavar="N",
        help="run the script N times, each in a fresh interpreter, into a run set: -o FOLDER/ "
        "gets one dataset per run (run-0001/, ...; numbering goes on after the runs already "
        "there), for recfn compare",
    )


def add_parser(commands: argparse._SubParsersAction[Parser]) -> Parser:
    """The ``run`` subcommand's parser, added to ``commands`` (the subparsers of ``recfn``)."""
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
    return run


def run(parser: Parser, argv: Sequence[str]) -> int:
    from recfn.notebook_ext.capture import Capture

    run_parser = subcommand_parser(parser, "run")
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
    if args.repeat is not None:
        return _repeat(args, own, script, script_args)
    if not os.path.exists(script):
        raise CLIError(f"run: no such script: {script!r}")
    if os.path.isdir(script) and not os.path.exists(os.path.join(script, "__main__.py")):
        raise CLIError(f"run: {script!r} is a folder without __main__.py")
    dataset = _dataset_folder(args.output)
    if args.output is not None and dataset is None:
        check_trace_path(args.output, "-o")
    if args.timeline is not None:
        check_image_path(args.timeline, "--timeline")
    check_positive(args.top, "--top")
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
        sys.stderr.write(summary_text(trace, args.top) + "\n")
    if args.output is not None and args.output not in capture.dumps:
        trace.save(args.output, overwrite=args.force)
        sys.stderr.write(f"recfn: wrote {args.output}\n")
    elif not args.quiet:
        sys.stderr.write("recfn: trace not saved (use -o trace.parquet to keep it)\n")
    if args.timeline is not None:
        write_timeline(trace, args.timeline, overwrite=args.force)
        sys.stderr.write(f"recfn: wrote {args.timeline}\n")
    return code


def _dataset_folder(output: Optional[str]) -> Optional[str]:
    """``output`` when it names a folder for a dataset (``capture.dataset_folder``)."""
    from recfn.errors import CaptureError
    from recfn.notebook_ext.capture import dataset_folder

    try:
        return None if output is None else dataset_folder(output, "-o")
    except CaptureError as exc:
        raise CLIError(str(exc)) from None


def _report_dataset(folder: str, args: argparse.Namespace, code: int) -> int:
    """The summary of every process's parts in ``folder`` (out of core when it can be)."""
    trace = load_trace(folder)
    if not args.quiet:
        sys.stdout.flush()
        text = files_summary_text(trace, ["name"], args.top, "total_ns")
        sys.stderr.write((text if text is not None else summary_text(trace, args.top)) + "\n")
    sys.stderr.write(f"recfn: wrote {len(trace.files)} parts into {folder}\n")
    if args.timeline is not None:
        write_timeline(trace, args.timeline, overwrite=args.force)
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
        return exit_code(exc.code)
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


def _print_script_traceback(exc: BaseException, script_path: str) -> None:
    """The traceback from the script's first frame on (runpy's and recfn's frames dropped)."""
    tb: Optional[TracebackType] = exc.__traceback__
    import recfn.notebook_ext

    ours = tuple(  # recfn's own frames (the capture's, runpy's): not the script's
        os.path.dirname(os.path.abspath(str(package.__file__)))
        for package in (recfn, recfn.notebook_ext)
    )
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        filename = filename if filename.startswith("<") else os.path.abspath(filename)
        if filename == script_path or not (filename.startswith(ours) or "runpy" in filename):
            break
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _repeat(args: argparse.Namespace, own: list[str], script: str, script_args: list[str]) -> int:
    """``--repeat N -o FOLDER/``: the script run N times, each by ``recfn run`` in a fresh
    interpreter (so no run inherits another's imports or caches), into ``FOLDER/run-<k>/``.
    Stops at the first run that exits non-zero, with its code; the runs recorded stay."""
    import subprocess

    from recfn.analysis.runsets import next_run_folders

    check_positive(args.repeat, "--repeat")
    folder = _dataset_folder(args.output) if args.output is not None else None
    if folder is None:
        raise CLIError("run: --repeat needs -o FOLDER/ (a run set: one folder per run)", EXIT_USAGE)
    if args.timeline is not None:
        raise CLIError("run: --repeat writes no --timeline (draw one run's afterwards)", EXIT_USAGE)
    if not os.path.exists(script):
        raise CLIError(f"run: no such script: {script!r}")
    kept = []  # recfn's own options but --repeat (and -o, given anew per run)
    skip = False
    for token in own:
        if skip:
            skip = False
        elif token in ("--repeat", "-o", "--output"):
            skip = True
        elif not token.startswith(("--repeat=", "--output=", "-o=")):
            kept.append(token)
    os.makedirs(folder, exist_ok=True)
    code = EXIT_OK
    targets = next_run_folders(folder, args.repeat)
    for k, target in enumerate(targets, 1):
        sys.stderr.write(f"recfn: run {k}/{args.repeat} -> {target}\n")
        command = [sys.executable, "-m", "recfn", "run", *kept, "-q", "-o", target + os.sep]
        code = subprocess.run([*command, "--", script, *script_args]).returncode
        if code != EXIT_OK:
            sys.stderr.write(f"recfn: run {k} exited with {code}; stopping\n")
            break
    done = [t for t in targets if os.path.isdir(t)]
    sys.stderr.write(
        f"recfn: {len(done)} run{'s' if len(done) != 1 else ''} in {folder} "
        f"(compare: recfn compare BASELINE {folder})\n"
    )
    return code
