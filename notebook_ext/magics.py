# mypy: disallow-untyped-calls=False, disallow-untyped-decorators=False
"""``%%record_function`` and ``%record_function``: profile a cell or a statement, show the result.

The cell runs inside a USER_SCOPE range named NAME (default ``cell[<execution count>]``) under
``recfn.profile``; then a header line, the summary table (HTML) and the timeline (PNG) are shown.
If the cell raises (KeyboardInterrupt included) what was captured is still kept and shown,
marked as interrupted, and the exception then propagates so the traceback shows as usual.
"""

from __future__ import annotations

import ast
import keyword
import os
import shlex
import sys
from collections.abc import Callable
from typing import Any, Optional

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from recfn.notebook_ext.capture import Capture, CaptureError, ProfileOptions, check_output_path
from recfn.notebook_ext.display import show
from recfn.notebook_ext.session import current_session
from recfn.trace import Trace

MAGIC_NAME = "record_function"

# Options of the line magic that take a value: the statement starts after the last option.
_VALUE_OPTIONS = frozenset({"-o", "--save", "--sample", "--max-events", "-n", "--name"})
_FLAG_OPTIONS = frozenset(
    {"--shapes", "--memory", "--stack", "--flops", "--no-timeline", "--quiet", "--append",
     "--last", "--reset", "-h", "--help"}
)  # fmt: skip


def _parse_options(parser: Any, text: str) -> Any:
    """Parse the magic's options with shell quoting (``--save "my trace.parquet"``)."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"%{MAGIC_NAME}: {exc} in {text.strip()!r}") from None
    return parser.parse_args(argv)


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--sample expects a probability such as 0.1, got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise UsageError(f"--sample must be in (0, 1], got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise UsageError(f"--max-events expects a positive integer, got {text!r}") from None
    if value <= 0:
        raise UsageError(f"--max-events must be positive, got {value}")
    return value


def _options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options shared by the cell and the line form (applied bottom-up)."""
    decorators = [
        argument("-h", "--help", action="store_true", help="show this help and do nothing else"),
        argument("--reset", action="store_true", help="line magic: clear the session's traces"),
        argument("--last", action="store_true", help="line magic: show the last result again"),
        argument(
            "--append",
            action="store_true",
            help="add this cell to the session's combined trace (recfn.session().trace()); "
            "-o and --save then hold the combined trace",
        ),
        argument(
            "--quiet", action="store_true", help="show nothing (still stored, -o/--save apply)"
        ),
        argument("--no-timeline", action="store_true", help="skip the timeline PNG"),
        argument("--max-events", type=_positive_int, metavar="N", help="bound the events kept"),
        argument(
            "--sample",
            type=_probability,
            default=1.0,
            metavar="P",
            help="record each range with probability P (0 < P <= 1)",
        ),
        argument(
            "--flops",
            action="store_true",
            help="count FLOPs of ranges with a formula (matmul, conv, ...; recfn.register_flops)",
        ),
        argument("--stack", action="store_true", help="record the Python stack of each range"),
        argument("--memory", action="store_true", help="record memory events (tracemalloc)"),
        argument("--shapes", action="store_true", help="record input shapes and dtypes"),
        argument(
            "--save",
            metavar="PATH",
            help="write the trace: Parquet, or Chrome JSON for .json/.json.gz",
        ),
        argument("-o", dest="output", metavar="VAR", help="store the events DataFrame in VAR"),
        argument("-n", "--name", dest="range_name", metavar="NAME", help="the range name"),
        argument(
            "name",
            nargs="?",
            help="cell magic: the range name (default cell[<execution count>]); "
            "line magic: the statement to profile",
        ),
    ]
    for decorate in decorators:
        func = decorate(func)
    return func


def split_line(line: str) -> tuple[str, str]:
    """Split the line magic's text into (options, statement) at the first non-option token.

    ``--`` ends the options explicitly. Tokens may be quoted (``--save "my trace.parquet"``).
    """
    pos = 0
    n = len(line)
    while True:
        while pos < n and line[pos].isspace():
            pos += 1
        if pos >= n:
            return line, ""
        token, end = _token_at(line, pos)
        if not token.startswith("-") or token == "-":
            return line[:pos], line[pos:]
        if token == "--":
            return line[:pos], line[end:]
        name = token.split("=", 1)[0]
        if name in _VALUE_OPTIONS:
            pos = end
            if "=" not in token:
                while pos < n and line[pos].isspace():
                    pos += 1
                if pos < n:
                    _, pos = _token_at(line, pos)
        elif name in _FLAG_OPTIONS:
            pos = end
        else:
            raise UsageError(
                f"%{MAGIC_NAME}: unknown option {token!r} (put `--` before a statement that "
                "starts with '-'; see %record_function --help)"
            )


def _token_at(line: str, pos: int) -> tuple[str, int]:
    """The whitespace-delimited (quote-aware) token starting at ``pos`` and where it ends."""
    quote: Optional[str] = None
    chars: list[str] = []
    i = pos
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == quote:
                quote = None
            else:
                chars.append(ch)
        elif ch in "'\"":
            quote = ch
        elif ch.isspace():
            break
        else:
            chars.append(ch)
        i += 1
    return "".join(chars), i


@magics_class
class RecordFunctionMagics(Magics):
    """The recfn magics (``%load_ext recfn``)."""

    @property
    def ip(self) -> Any:
        """The shell these magics are registered on (always set once registered)."""
        shell = self.shell
        assert shell is not None
        return shell

    @magic_arguments()
    @_options
    @line_cell_magic
    def record_function(self, line: str, cell: Optional[str] = None) -> Any:
        """Profile a cell (``%%record_function [NAME] [options]``) or one statement
        (``%record_function [options] STATEMENT``) with recfn and show the result inline: a header
        line, the summary table and the timeline. ``%record_function --last`` shows the last
        result again; ``%record_function --reset`` clears the session (``recfn.session()``).
        """
        __tracebackhide__ = True
        if cell is None:
            option_text, statement = split_line(line)
        else:
            option_text, statement = line, ""
        args = _parse_options(self.record_function.parser, option_text)
        if args.help:
            print(self.record_function.parser.format_help())
            return None
        if cell is None:
            return self._line(args, statement)
        if args.last or args.reset:
            raise UsageError("--last and --reset belong to the line magic %record_function")
        name = args.name or args.range_name or self._default_name()
        return self._profile(cell, name, args)

    # -- line magic -----------------------------------------------------------------------------

    def _line(self, args: Any, statement: str) -> Any:
        __tracebackhide__ = True
        session = current_session()
        if args.reset:
            if statement or args.last:
                raise UsageError("--reset takes no statement and no --last")
            count = session.reset()
            print(f"recfn: session cleared ({count} trace{'s' if count != 1 else ''} dropped)")
            return None
        if args.last:
            if statement:
                raise UsageError("--last takes no statement")
            trace = session.last
            if trace is None:
                raise UsageError("no profiled cell yet: run %%record_function first")
            if not args.quiet:
                show(trace, shell=self.ip, timeline=not args.no_timeline)
            return None
        if not statement.strip():
            raise UsageError(
                "%record_function needs a statement (or --last / --reset); "
                "use %%record_function to profile a whole cell"
            )
        return self._profile(statement, args.range_name or self._default_name(), args)

    # -- profiling ------------------------------------------------------------------------------

    def _cell_number(self) -> int:
        """The running cell's In[] number. IPython 9 increments ``execution_count`` before a
        cell runs and IPython 8 after; the input history holds the running cell in both."""
        history = getattr(self.ip, "history_manager", None)
        if history is not None and len(history.input_hist_raw) > 1:
            return len(history.input_hist_raw) - 1
        return int(self.ip.execution_count)

    def _default_name(self) -> str:
        return f"cell[{self._cell_number()}]"

    def _profile(self, source: str, name: str, args: Any) -> Any:
        __tracebackhide__ = True
        if args.output is not None and (
            not args.output.isidentifier() or keyword.iskeyword(args.output)
        ):
            raise UsageError(f"-o expects a Python variable name, got {args.output!r}")
        try:
            if args.save is not None:
                args.save = check_output_path(os.path.expanduser(args.save))
            options = ProfileOptions(
                shapes=args.shapes,
                memory=args.memory,
                stack=args.stack,
                flops=args.flops,
                sample=args.sample,
                max_events=args.max_events,
            )
        except CaptureError as exc:
            raise UsageError(str(exc)) from None
        body, last_expr = self._compile(source)

        capture = Capture(name, options, execution_count=self._cell_number())
        error: Optional[BaseException] = None
        result: Any = None
        user_ns = self.ip.user_ns
        try:
            with capture:
                exec(body, self.ip.user_global_ns, user_ns)
                if last_expr is not None:
                    result = eval(last_expr, self.ip.user_global_ns, user_ns)
        except CaptureError as exc:
            raise UsageError(str(exc)) from None
        except BaseException as exc:  # KeyboardInterrupt too: keep and show what was captured
            error = exc
        trace = capture.trace
        if trace is None:  # the profiler itself failed before capturing anything
            if error is not None:
                raise error
            return None
        self._keep(trace, args)
        if error is not None:
            raise error
        return result

    def _compile(self, source: str) -> tuple[Any, Any]:
        """Compile like IPython does (magics and ``!`` lines transformed, tracebacks with source
        lines); a trailing expression is compiled apart so its value becomes the cell's Out."""
        shell = self.ip
        transformed = shell.transform_cell(source)
        number = shell.execution_count
        filename = shell.compile.cache(transformed, number, raw_code=source)
        tree = shell.compile.ast_parse(transformed, filename=filename)
        tree = shell.transform_ast(tree)
        last_expr = None
        try:
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                expr = ast.Expression(tree.body.pop().value)
                last_expr = shell.compile(expr, filename, "eval")
            body = shell.compile(tree, filename, "exec")
        except SyntaxError as exc:
            if "outside function" in str(exc) and "await" in str(exc):
                raise UsageError(
                    f"%{MAGIC_NAME} cannot run top-level `await`; profile it with "
                    "`with recfn.profile() as prof: await ...` and show prof.to_pandas()"
                ) from None
            raise
        return body, last_expr

    def _keep(self, trace: Trace, args: Any) -> None:
        """Store the trace in the session, -o and --save; then show it unless --quiet."""
        session = current_session()
        session.add(trace, append=args.append)
        kept = session.trace() if args.append else trace
        if args.output is not None:
            self.ip.user_ns[args.output] = kept.to_pandas()
        if args.save is not None:
            try:
                kept.save(args.save)
            except (OSError, ValueError) as exc:
                print(f"recfn: could not save the trace to {args.save!r}: {exc}", file=sys.stderr)
        if not args.quiet:
            show(trace, shell=self.ip, timeline=not args.no_timeline)
            if args.append:
                print(f"recfn: appended; session trace: {kept.header()}")


def register(ipython: Any) -> None:
    """Register the magics on ``ipython`` and make sure ``df.recfn`` exists."""
    import recfn.analysis as analysis  # noqa: F401  (registers the df.recfn accessor for -o frames)

    ipython.register_magics(RecordFunctionMagics)


def unregister(ipython: Any) -> None:
    """Remove the magics registered by ``register``."""
    magics = ipython.magics_manager.magics
    for kind in ("line", "cell"):
        magics[kind].pop(MAGIC_NAME, None)
    ipython.magics_manager.registry.pop(RecordFunctionMagics.__name__, None)
