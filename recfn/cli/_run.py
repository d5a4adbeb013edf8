"""``recfn run script.py [args...]`` / ``recfn run -m module [args...]``: run a script or a module
under the profiler, as the magic profiles a cell."""

from __future__ import annotations

import argparse
import importlib.util
import os
import runpy
import signal
import sys
import traceback
import types
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
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
from recfn.errors import CaptureError, CLIError, OptionError, RecfnValueError
from recfn.notebook_ext.options import (
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
        usage="recfn run [options] script.py [args...]  |  recfn run [options] -m module [args...]",
        help="profile a Python script or module",
        description="Run SCRIPT (or, with -m, MODULE as python -m does) with ARGS under the recfn "
        "profiler: its __main__ in a USER_SCOPE range, plus every range it records. recfn's "
        "options may come before or after the script (before -m MODULE: every argument after "
        "the module is the module's); put `--` before script arguments that collide with them. "
        "Without a trace flag, the calls of your code and the library calls it makes are traced "
        "at any depth, the libraries' own calls below those counted, not recorded "
        "(--no-trace-calls: only the script's own ranges; --trace-calls: every call).",
        allow_abbrev=False,
    )
    _add_run_options(run)
    add_capture_options(run.add_argument_group("capture options (as recfn.profile's)"))
    run.add_argument(
        "script", nargs="?", help="the Python file to run (or -m MODULE, as python -m runs it)"
    )
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    return run


def run(parser: Parser, argv: Sequence[str]) -> int:
    from recfn.notebook_ext.capture import Capture

    run_parser = subcommand_parser(parser, "run")
    try:
        module_run = _split_module(run_parser, argv)
        if module_run is None:
            own, rest, _ = split_options(run_parser, argv, interleaved=True)
        else:
            own, module, rest = module_run
    except ValueError as exc:
        raise CLIError(f"run: {exc} (see recfn run --help)", EXIT_USAGE) from None
    if any(token in ("-h", "--help") for token in own):
        run_parser.print_help()
        return EXIT_OK
    spec: Optional[ModuleSpec] = None
    if module_run is not None:
        args = run_parser.parse_args(own)
        if args.repeat is not None:
            return _repeat(args, own, ["-m", module, *rest])
        spec = _module_spec(module)
        script, script_args = str(spec.origin), rest
        name = module
    else:
        if not rest:
            raise CLIError(
                "run: which script? usage: recfn run script.py [args...] -o trace.parquet "
                "(or recfn run -m module [args...])",
                EXIT_USAGE,
            )
        script, script_args = rest[0], rest[1:]
        args = run_parser.parse_args([*own, script])
        if not os.path.exists(script):
            raise CLIError(f"run: no such script: {script!r}")
        if args.repeat is not None:
            return _repeat(args, own, ["--", script, *script_args])
        if os.path.isdir(script) and not os.path.exists(os.path.join(script, "__main__.py")):
            raise CLIError(f"run: {script!r} is a folder without __main__.py")
        name = os.path.basename(os.path.abspath(script))
    dataset = _dataset_folder(args.output)
    if args.output is not None and dataset is None:
        check_trace_path(args.output, "-o")
        _check_writable(args.output, "-o", args.force)
    if args.timeline is not None:
        check_image_path(args.timeline, "--timeline")
        _check_writable(args.timeline, "--timeline", args.force)
    check_positive(args.top, "--top")
    try:
        config = front_end_config(args)
    except OptionError as exc:
        raise CLIError(f"run: {exc}", EXIT_USAGE) from None

    capture = Capture(
        name,
        config,
        range_name="__main__",
        dataset=dataset,
        output_file=args.output if dataset is None else None,
    )
    # Read and compile a script file before the exit signals are handled: reading a FIFO waits
    # for its writer, and SIGTERM must still end that wait.
    path = os.path.abspath(script)
    compiled = _compile_script(path) if spec is None and not os.path.isdir(path) else None
    if isinstance(compiled, int):
        return compiled
    signals = _ExitSignals()
    signals.install()
    try:
        with warnings.catch_warnings():  # said below, once, without a source line
            warnings.filterwarnings("ignore", "recfn: flight recorder wrote", RuntimeWarning)
            code = _run_script(capture, script, script_args, signals, spec, compiled)
        code = _finish(capture, args, config, dataset, code)  # a signal now waits for it
    finally:
        signals.restore()
    return signals.exit_code(code)


def _finish(
    capture: Any, args: argparse.Namespace, config: Any, dataset: Optional[str], code: int
) -> int:
    """Say what the flight recorder wrote, and report and save the capture."""
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


def _check_writable(path: str, what: str, force: bool) -> None:
    """Refuse, before the script runs, an output that exists and that recfn did not write
    (unless ``--force``): the capture would be lost at the end, when saving it is refused."""
    from recfn.formats.files import written_by_recfn

    if force or not os.path.lexists(path) or written_by_recfn(path):
        return
    raise CLIError(
        f"{what}: refusing to overwrite {path!r}: recfn did not write it (it is not a recfn "
        "trace or image); choose another name, or pass --force"
    )


EXIT_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))
"""The signals that end a run politely (as recfn.capture's followed children handle them)."""


class Terminated(KeyboardInterrupt):
    """Raised in the script when ``recfn run`` gets SIGTERM or SIGHUP: the script ends as on
    Ctrl-C (``except KeyboardInterrupt`` sees it), and what was captured is kept."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _ExitSignals:
    """SIGTERM and SIGHUP (a batch scheduler's time limit, a closed terminal, ``timeout``,
    Kubernetes) handled as ``recfn run`` handles Ctrl-C: while the script's code runs
    (``raising``) they raise ``Terminated`` in it; otherwise they are noted, so that stopping
    the profile and saving what it captured finish first. ``exit_code`` is then the
    conventional 128 + the signal's number. A forked child that inherits the handler dies of
    the signal as it would without it."""

    recfn_run_handler = True  # recfn.capture._follow: not a followed child's handler

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.received: Optional[int] = None
        self.raising = False
        self._previous: dict[int, Any] = {}

    def __call__(self, signum: int, frame: Any) -> None:
        if os.getpid() != self.pid:  # a forked child: as if there were no handler
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if self.received is None:
            self.received = signum
        if self.raising:
            self.raising = False  # once: the script's clean-up is not interrupted again
            raise Terminated(signum)

    def install(self) -> None:
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        for signum in EXIT_SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                self._previous[signum] = signal.signal(signum, self)

    def restore(self) -> None:
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) is self:
                signal.signal(signum, previous)
        self._previous.clear()

    def exit_code(self, code: int) -> int:
        return code if self.received is None else 128 + self.received


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


def _split_module(
    parser: argparse.ArgumentParser, argv: Sequence[str]
) -> Optional[tuple[list[str], str, list[str]]]:
    """``(recfn's options, MODULE, the module's arguments)`` for ``recfn run [options] -m MODULE
    [args...]``: as with ``python -m``, every argument after the module is the module's. None
    when a script comes first (a later ``-m`` is then the script's)."""
    for i, token in enumerate(argv):
        if token == "--":
            return None
        if token == "-m" or (token.startswith("-m") and len(token) > 2):
            own, rest, _ = split_options(parser, argv[:i])  # ValueError: an unknown option
            if rest:
                return None  # a script came first
            module = token[2:] or (argv[i + 1] if i + 1 < len(argv) else "")
            if not module:
                raise RecfnValueError("option -m needs a value")
            return own, module, list(argv[i + (1 if token[2:] else 2) :])
    return None


def _module_spec(module: str) -> ModuleSpec:
    """The spec of the code ``python -m module`` runs (a package's ``__main__``), found as
    Python finds it (the current folder first; parent packages are imported); a CLIError
    saying what is missing."""
    sys.path.insert(0, os.getcwd())
    try:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:
            package = module
            spec = importlib.util.find_spec(f"{module}.__main__")
            if spec is None:
                raise CLIError(f"run: {package!r} is a package without a __main__ module")
    except (ImportError, ValueError) as exc:
        raise CLIError(f"run: cannot find module {module!r}: {exc}") from None
    finally:
        del sys.path[0]
    if spec is None or spec.loader is None or spec.origin is None:
        raise CLIError(f"run: no module named {module!r}")
    return spec


def _compile_script(path: str) -> types.CodeType | int:
    """The code of the script file ``path``; for a syntax error, the exit code of Python's (its
    error shown as Python shows it). OSError (unreadable) is a user mistake main reports."""
    with open(path, "rb") as source:
        text = source.read()
    try:
        return compile(text, path, "exec")
    except (SyntaxError, ValueError) as exc:  # ValueError: null bytes in the source
        traceback.print_exception(type(exc), exc, None)
        return EXIT_FAILURE


def _run_script(
    capture: Any,
    script: str,
    script_args: list[str],
    signals: _ExitSignals,
    spec: Optional[ModuleSpec] = None,
    compiled: Optional[types.CodeType] = None,
) -> int:
    """Run ``script`` (its ``compiled`` code, or the module of ``spec``) as ``__main__`` inside
    ``capture``; return the exit code Python would (128 + N for a signal N that ended it)."""
    path = os.path.abspath(script)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script, *script_args]
    if spec is not None:
        sys.path.insert(0, os.getcwd())  # as python -m puts it
    else:
        sys.path.insert(0, path if os.path.isdir(path) else os.path.dirname(path))
    try:
        if spec is not None:
            _run_module(capture, spec, signals)
        elif os.path.isdir(path):
            with capture:
                signals.raising = True
                try:
                    runpy.run_path(path, run_name="__main__")
                finally:
                    signals.raising = False
        else:
            assert compiled is not None
            _run_main(
                capture,
                signals,
                compiled,
                __file__=path,
                __cached__=None,
                __loader__=None,
                __package__=None,
            )
        return EXIT_OK
    except SystemExit as exc:
        return exit_code(exc.code)
    except Terminated as exc:
        sys.stderr.write(f"recfn: terminated by {exc}; keeping what was captured\n")
        return 128 + exc.signum
    except KeyboardInterrupt:
        sys.stderr.write("recfn: interrupted; keeping what was captured\n")
        return EXIT_INTERRUPTED
    except CaptureError as exc:
        if not capture.started:  # the profile could not start (--cuda without a CUDA device)
            raise CLIError(f"run: {exc}") from None
        _print_script_traceback(exc, path)
        return EXIT_FAILURE
    except BaseException as exc:  # the script's own error: show it as Python would
        _print_script_traceback(exc, path)
        return EXIT_FAILURE
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def _run_module(capture: Any, spec: ModuleSpec, signals: _ExitSignals) -> None:
    """``runpy.run_module(..., run_name="__main__")`` for a module found by ``_module_spec``,
    its code read before the capture starts (the module's own code is user code)."""
    loader: Any = spec.loader
    code = loader.get_code(spec.name)
    if code is None:
        raise CLIError(f"run: no code to run in module {spec.name!r}")
    _run_main(
        capture,
        signals,
        code,
        __file__=spec.origin,
        __cached__=spec.cached,
        __loader__=loader,
        __package__=spec.parent,
        __spec__=spec,
    )


def _run_main(
    capture: Any, signals: _ExitSignals, code: types.CodeType, **module_globals: Any
) -> None:
    """Run ``code`` as the ``__main__`` module (with ``module_globals``) inside ``capture``."""
    module = types.ModuleType("__main__")
    module.__dict__.update(module_globals)
    module.__dict__.setdefault("__spec__", None)
    saved_main = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        with capture:
            signals.raising = True
            try:
                exec(code, module.__dict__)
            finally:
                signals.raising = False
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


def _repeat(args: argparse.Namespace, own: list[str], target: list[str]) -> int:
    """``--repeat N -o FOLDER/``: the script (``target``: ``["--", script, *args]`` or
    ``["-m", module, *args]``) run N times, each by ``recfn run`` in a fresh interpreter (so no
    run inherits another's imports or caches), into ``FOLDER/run-<k>/``. Stops at the first run
    that exits non-zero, with its code; the runs recorded stay. SIGTERM and SIGHUP are passed
    on to the run in progress (which saves what it captured) and end the repetition."""
    from recfn.analysis.runsets import next_run_folders

    check_positive(args.repeat, "--repeat")
    folder = _dataset_folder(args.output) if args.output is not None else None
    if folder is None:
        raise CLIError("run: --repeat needs -o FOLDER/ (a run set: one folder per run)", EXIT_USAGE)
    if args.timeline is not None:
        raise CLIError("run: --repeat writes no --timeline (draw one run's afterwards)", EXIT_USAGE)
    if target[0] == "-m":
        _module_spec(target[1])  # a missing module is said once, before any run
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
    signals = _ExitSignals()
    signals.install()
    try:
        for k, run_folder in enumerate(targets, 1):
            sys.stderr.write(f"recfn: run {k}/{args.repeat} -> {run_folder}\n")
            command = [sys.executable, "-m", "recfn", "run", *kept, "-q", "-o", run_folder + os.sep]
            code = _run_child([*command, *target], signals)
            if signals.received is not None:
                break
            if code != EXIT_OK:
                sys.stderr.write(f"recfn: run {k} exited with {code}; stopping\n")
                break
    finally:
        signals.restore()
    done = [t for t in targets if os.path.isdir(t)]
    sys.stderr.write(
        f"recfn: {len(done)} run{'s' if len(done) != 1 else ''} in {folder} "
        f"(compare: recfn compare BASELINE {folder})\n"
    )
    return signals.exit_code(code)


def _run_child(command: list[str], signals: _ExitSignals) -> int:
    """Run ``command`` to its end; a SIGTERM or SIGHUP ``signals`` notes meanwhile is sent on
    to it (it then saves what it captured and exits)."""
    import subprocess

    child = subprocess.Popen(command)
    forwarded = False
    while True:
        try:
            return child.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            if signals.received is not None and not forwarded:
                child.send_signal(signals.received)
                forwarded = True
