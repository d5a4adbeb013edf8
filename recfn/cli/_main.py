"""The ``recfn`` command: the top parser, dispatch to one module per subcommand, and the one-line
errors every failure ends with."""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Final, Optional, TextIO

from recfn.cli import _codegen, _compare, _convert, _demo, _diff, _run, _summary, _timeline
from recfn.cli._common import (
    DEBUG_ENV,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    Parser,
    exit_code,
    out,
)
from recfn.errors import CLIError, RecfnError

COMMANDS: Final = (_run, _summary, _timeline, _convert, _diff, _compare, _demo, _codegen)
"""One module per subcommand, in the order of ``recfn --help``: each has ``add_parser(commands)``
and ``run``. A new subcommand is a new module here and its entry in this tuple."""


def build_parser() -> Parser:
    """The ``recfn`` parser with every subcommand's."""
    parser = Parser(
        prog=PROG,
        description="Profile Python programs with recfn ranges; inspect, plot, convert and "
        "compare traces.",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--version",
        action="store_true",
        help="print the recfn version and what is compiled and native in this install",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


USER_ERRORS: tuple[type[BaseException], ...] = (
    RecfnError, FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError,
    PermissionError,
    json.JSONDecodeError,
)  # fmt: skip
"""What the input is to blame for: one line, exit 1 (every exception recfn raises on purpose
names what was wrong; the system's file errors; JSON that does not parse)."""


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``recfn`` command line; returns the exit code (the console script exits with it)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
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


_PACKAGE: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The folder holding recfn (and, installed, ``recfn.analysis`` and ``recfn.notebook_ext``)."""
_SHOW_WARNING: Final = warnings.showwarning


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Optional[TextIO] = None,
    line: Optional[str] = None,
) -> None:
    """recfn's own warnings as one ``recfn: warning:`` line on stderr, as errors are; any
    other code's (a script under ``recfn run``) as Python shows them."""
    text = str(message)
    ours = text.startswith("recfn") or os.path.abspath(filename).startswith(_PACKAGE + os.sep)
    if not ours:
        _SHOW_WARNING(message, category, filename, lineno, file, line)
        return
    if text.startswith("recfn:"):
        text = text.removeprefix("recfn:").strip()
    else:  # another library's, met in recfn's code
        text = f"{category.__name__}: {text}"
    stream: Any = sys.stderr if file is None else file
    try:
        stream.write(f"{PROG}: warning: {' '.join(text.split())}\n")
    except (OSError, ValueError):  # a closed stderr
        pass


_MMAP_THRESHOLD: Final = -3
_TRIM_THRESHOLD: Final = -1
_ARENA_MAX: Final = -8
"""glibc's ``mallopt`` parameters (malloc.h)."""


ARROW_PURGE_ENV: Final = "MIMALLOC_PURGE_DELAY"
"""The setting of Arrow's allocator (mimalloc, pyarrow's default pool): how long (ms) it waits
before it hands freed pages back to the system."""
ARROW_PURGE_MS: Final = "1000"
"""`keep_arrow_pages`' value: mimalloc's own, 10 ms, is shorter than reading one file."""
_READS_RUN_SETS: Final = ("compare",)
"""Subcommands that read many files of about one size one after another (`keep_arrow_pages`)."""


def keep_arrow_pages() -> None:
    """Ask Arrow's allocator to keep freed pages for a second before it hands them back
    (`ARROW_PURGE_ENV`, unless the environment says otherwise; read when pyarrow is first
    imported), for the subcommands that read run sets (`_READS_RUN_SETS`): with mimalloc's
    10 ms each run's row groups were decoded into fresh pages that the kernel zeroed, 0.5 s of
    CPU in a 2.4 s ``recfn compare`` of 2 x 10 runs of 1M ranges. The pages kept raise the peak
    memory by about a tenth (333 -> 366 MiB there), which is why the other commands do not ask:
    a dataset's summary gained less than its memory grew."""
    os.environ.setdefault(ARROW_PURGE_ENV, ARROW_PURGE_MS)


def keep_freed_memory() -> None:
    """Ask glibc's malloc to keep large freed blocks for reuse instead of handing them back.

    Reading a run set or a dataset allocates and frees the same large arrays once per file; by
    default glibc maps each anew, and the kernel zeroes every fresh page (reading 1M-range runs
    one after the other took 15-20% more CPU that way). The subcommands that only read and write
    files exit when done, so what is kept is given back then; peak memory is unchanged (the
    blocks are reused, not added). Elsewhere (another C library, another system) nothing is
    done."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_MMAP_THRESHOLD, 32 << 20)  # glibc's largest: blocks below it come from the heap
    mallopt(_TRIM_THRESHOLD, 1 << 30)
    mallopt(_ARENA_MAX, 1)  # one heap: a block one reader thread frees, the next one reuses


_USER_CODE: Final = ("run", "demo")
"""Subcommands that run code of their own (threads, atexit handlers): they exit as Python does."""

BLAS_THREADS_ENV: Final = "OPENBLAS_NUM_THREADS"


def quiet_blas() -> None:
    """Start NumPy's OpenBLAS with one thread (unless the environment says otherwise), for the
    subcommands that only read and write files: they multiply no matrices, and OpenBLAS starts a
    thread per core at NumPy's import that spins for a while before it sleeps (on 2 cores about
    0.1 s of CPU taken from the reading threads). Called before NumPy is imported (``import
    recfn.cli`` does not import it); code a user runs (`_USER_CODE`) keeps its BLAS threads."""
    os.environ.setdefault(BLAS_THREADS_ENV, "1")


def console() -> None:
    """The ``recfn`` console script and ``python -m recfn``: `main`, then the exit.

    A subcommand that only reads and writes files exits once its atexit handlers have run and
    its output is flushed, without the interpreter's teardown: there pyarrow's C++ thread pools
    can abort the process ("terminate called without an active exception", exit 134) after
    the work is done and the exit code decided, about once in a hundred runs on a busy machine
    (apache/arrow#34314). ``run`` and ``demo`` exit as Python does."""
    argv = sys.argv[1:]
    if not (argv[:1] and argv[0] in _USER_CODE):
        quiet_blas()
        keep_freed_memory()
    if argv[:1] and argv[0] in _READS_RUN_SETS:
        keep_arrow_pages()
    code = main(argv)
    if argv[:1] and argv[0] in _USER_CODE:
        raise SystemExit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`recfn summary t.parquet | head`)
            pass
    os._exit(code)


def _dispatch(argv: list[str]) -> int:
    parser = build_parser()
    if any("\x00" in arg for arg in argv):  # no shell passes one; paths cannot hold one
        raise CLIError("an argument holds a NUL character", EXIT_USAGE)
    if argv and argv[0] == "codegen":  # codegen parses its own arguments
        return _codegen.run(argv[1:])
    if argv and argv[0] == "run":  # recfn's options and the script's are split first
        return _run.run(parser, argv[1:])
    if not argv:
        parser.print_help()
        return EXIT_USAGE
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help
        return exit_code(exc.code)
    if args.version:
        from recfn.native import build_info

        out(str(build_info()))
        return EXIT_OK
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "summary": _summary.run,
        "timeline": _timeline.run,
        "convert": _convert.run,
        "diff": _diff.run,
        "compare": _compare.run,
        "demo": _demo.run,
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
