# mypy: disallow-untyped-calls=False, disallow-untyped-decorators=False
"""``%%record_function`` and ``%record_function``: profile a cell or a statement, show the result.

The cell runs inside a USER_SCOPE range named NAME (default ``cell[<execution count>]``) under
``recfn.profile``; then a header line, the summary table (HTML), the interactive view (a widget
in a live kernel, with an HTML stand-in for exported notebooks: ``fallback``) and the timeline
(PNG) are shown, together within ``--max-output-bytes`` (1 MB by default).
Zero-annotation default: without a trace flag, the calls of user code (the cell's and any code
that is not the standard library, an installed package or recfn) and the library calls it makes
are traced at any depth, the library's own calls below those counted, not recorded
(``trace_user_code``), so plain code gets a call tree down to its callbacks; the header says so.
``--no-trace-calls`` keeps only the cell's ranges, ``--trace-calls`` traces every call.
If the cell raises (KeyboardInterrupt included) what was captured is still kept and shown,
marked as interrupted, and the exception then propagates so the traceback shows as usual.
"""

from __future__ import annotations

import ast
import keyword
import os
import shlex
import sys
from argparse import ArgumentTypeError
from collections.abc import Callable
from typing import Any, Optional

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from recfn.errors import CaptureError, OptionError
from recfn.formats.trace import Trace
from recfn.notebook_ext.capture import Capture, check_output_path, dataset_folder
from recfn.notebook_ext.display import show
from recfn.notebook_ext.fallback import DEFAULT_OUTPUT_BUDGET
from recfn.notebook_ext.options import (
    argument_specs,
    front_end_config,
    split_options,
)
from recfn.notebook_ext.sessions import current_session

MAGIC_NAME = "record_function"


def _parse_options(parser: Any, argv: list[str]) -> Any:
    """Parse the magic's options; the capture options become ``args.config``."""
    args = parser.parse_args(argv)
    try:
        args.config = front_end_config(args)
    except OptionError as exc:
        raise UsageError(f"%{MAGIC_NAME}: {exc}") from None
    return args


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ArgumentTypeError(f"expects an integer, got {text!r}") from None
    if value <= 0:
        raise ArgumentTypeError(f"must be positive, got {value}")
    return value


def _split_cell_line(line: str) -> list[str]:
    """The cell magic's options with shell quoting (``--output "my trace.parquet"``)."""
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%{MAGIC_NAME}: {exc} in {line.strip()!r}") from None


def _options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options shared by the cell and the line form (applied bottom-up)."""
    capture_options = [argument(*flags, **kwargs) for flags, kwargs in argument_specs()]
    decorators = [
        argument("-h", "--help", action="store_true", help="show this help and do nothing else"),
        argument("--reset", action="store_true", help="line magic: clear the session's traces"),
        argument("--last", action="store_true", help="line magic: show the last result again"),
        argument(
            "--append",
            action="store_true",
            help="add this cell to the session's combined trace (recfn.session().trace()); "
            "--output and --var then hold the combined trace",
        ),
        argument(
            "--quiet", action="store_true", help="show nothing (still stored, --output applies)"
        ),
        argument(
            "--no-timeline",
            action="store_true",
            help="skip the timeline: the interactive view, its HTML stand-in and the PNG",
        ),
        argument(
            "--max-output-bytes",
            type=_positive_int,
            default=DEFAULT_OUTPUT_BUDGET,
            metavar="N",
            help="bytes the cell's outputs may take in the notebook; parts that do not fit "
            f"(the embedded trace first) are left out (default {DEFAULT_OUTPUT_BUDGET:,})",
        ),
        *reversed(capture_options),
        argument(
            "--var",
            metavar="NAME",
            help="keep the trace (a recfn.Trace) in variable NAME: NAME.to_pandas() is the "
            "events DataFrame, NAME.summary() its summary, NAME.table the Arrow table",
        ),
        argument(
            "--compare",
            metavar="VAR_OR_PATH",
            help="also show how this cell's run compares with a baseline: a variable (a trace, "
            "a DataFrame, a list of them) or a run set's path; a table with change bars and a "
            "differential flame view (recfn.compare)",
        ),
        argument(
            "-o",
            "--output",
            "--save",
            dest="output",
            metavar="PATH",
            help="write the trace to PATH: Parquet, or Chrome JSON for .json/.json.gz; a folder "
            "(ending in / or existing) gets this cell's events as a Parquet dataset streamed "
            "while it runs (hostname=<host>/process=<pid>/part-N.parquet, child processes "
            "followed), as recfn.profile(output=...) and recfn run -o DIR/ write",
        ),
        argument(
            "--force",
            action="store_true",
            help="with --output: replace FILE even if recfn did not write it",
        ),
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


def split_line(parser: Any, line: str) -> tuple[list[str], str]:
    """Split the line magic's text into (its options, the statement) at the first token that is
    not one of ``parser``'s options. ``--`` ends the options explicitly. Tokens may be quoted
    (``--output "my trace.parquet"``); the statement is kept as written.
    """
    spans = _tokens(line)
    try:
        own, _, start = split_options(parser, [token for token, _ in spans])
    except ValueError as exc:
        raise UsageError(
            f"%{MAGIC_NAME}: {exc} (put `--` before a statement that starts with '-'; "
            "see %record_function --help)"
        ) from None
    return own, line[spans[start][1] :] if start < len(spans) else ""


def _tokens(line: str) -> list[tuple[str, int]]:
    """The whitespace-delimited, quote-aware tokens of ``line`` with where each starts."""
    out: list[tuple[str, int]] = []
    pos = 0
    while True:
        while pos < len(line) and line[pos].isspace():
            pos += 1
        if pos >= len(line):
            return out
        token, end = _token_at(line, pos)
        out.append((token, pos))
        pos = end


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
        line, the summary table and the timeline. Every call of your code and every library call it
        makes are traced unless a trace flag says otherwise (``--no-trace-calls``: only the
        cell's own ranges). ``%record_function --last`` shows the last
        result again; ``%record_function --reset`` clears the session (``recfn.session()``).
        """
        __tracebackhide__ = True
        parser = self.record_function.parser
        if cell is None:
            argv, statement = split_line(parser, line)
        else:
            argv, statement = _split_cell_line(line), ""
        args = _parse_options(parser, argv)
        if args.help:
            print(parser.format_help())
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
                show(
                    trace,
                    shell=self.ip,
                    timeline=not args.no_timeline,
                    budget=args.max_output_bytes,
                )
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
        if args.var is not None and (not args.var.isidentifier() or keyword.iskeyword(args.var)):
            raise UsageError(f"--var expects a Python variable name, got {args.var!r}")
        dataset = None
        if args.output is not None:
            try:
                dataset = dataset_folder(os.path.expanduser(args.output), "--output")
            except CaptureError as exc:
                raise UsageError(str(exc)) from None
        if args.output is not None and dataset is None:
            try:
                args.output = check_output_path(os.path.expanduser(args.output), "--output")
            except CaptureError as exc:
                hint = (
                    f" (to keep the events in a variable: --var {args.output})"
                    if args.output.isidentifier()
                    else ""
                )
                raise UsageError(f"{exc}{hint}") from None
        body, last_expr = self._compile(source)

        capture = Capture(
            name,
            args.config,
            execution_count=self._cell_number(),
            dataset=dataset,
            output_file=args.output if dataset is None else None,
        )
        error: Optional[BaseException] = None
        result: Any = None
        user_ns, global_ns = self.ip.user_ns, self.ip.user_global_ns  # not traced as the cell's
        try:
            with capture:
                exec(body, global_ns, user_ns)
                if last_expr is not None:
                    result = eval(last_expr, global_ns, user_ns)
        except CaptureError as exc:
            raise UsageError(str(exc)) from None
        except BaseException as exc:  # KeyboardInterrupt too: keep and show what was captured
            error = exc
        trace = capture.trace
        if trace is None:  # the profiler itself failed before capturing anything
            if error is not None:
                raise error
            return None
        self._keep(trace, args, written=dataset is not None or args.output in capture.dumps)
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

    def _keep(self, trace: Trace, args: Any, *, written: bool = False) -> None:
        """Store the trace in the session, --var (the Trace itself) and --output (unless the capture ``written``
        it there already: a dataset folder, a flight recorder's file); then show it unless
        --quiet."""
        session = current_session()
        session.add(trace, append=args.append)
        kept = session.trace() if args.append else trace
        if args.var is not None:
            self.ip.user_ns[args.var] = kept
        if args.output is not None and not written:
            try:
                kept.save(args.output, overwrite=args.force)
            except (OSError, ValueError) as exc:
                print(f"recfn: could not save the trace to {args.output!r}: {exc}", file=sys.stderr)
        if not args.quiet:
            reserve = _compare_reserve(args)
            show(
                trace,
                shell=self.ip,
                timeline=not args.no_timeline,
                budget=args.max_output_bytes - reserve,
                saved_path=args.output,
            )
            if args.compare is not None:
                _show_comparison(self.ip, trace, args.compare, reserve)
            if args.append:
                print(f"recfn: appended; session trace: {kept.header()}")


def _compare_reserve(args: Any) -> int:
    """Bytes of the output budget kept for ``--compare``'s view (none without it)."""
    from recfn.notebook_ext.compare_view import COMPARE_RESERVE

    return 0 if args.compare is None else min(COMPARE_RESERVE, args.max_output_bytes // 2)


def _show_comparison(shell: Any, trace: Trace, source: str, budget: int) -> None:
    """``--compare``: the cell's trace against the baseline ``source``; a bad baseline is said
    in one line, the cell's own result stays shown."""
    from recfn.errors import RecfnError
    from recfn.notebook_ext.compare_view import resolve_baseline, show_comparison

    try:
        comparison = trace.compare(resolve_baseline(source, shell.user_ns))
    except (RecfnError, OSError) as exc:
        print(f"recfn: no comparison with {source!r}: {exc}", file=sys.stderr)
        return
    show_comparison(comparison, budget)


def register(ipython: Any) -> None:
    """Register the magics on ``ipython`` and make sure ``df.recfn`` exists."""
    import recfn.analysis as analysis  # noqa: F401  (registers the df.recfn accessor for --var frames)
    from recfn.notebook_ext import frames
    from recfn.notebook_ext.widget import can_show

    ipython.register_magics(RecordFunctionMagics)
    frames.register(ipython)  # summaries shown with units
    if can_show(ipython):  # import the widget now, not in the first profiled cell's first paint
        import recfn.notebook_ext.widget.view  # noqa: F401


def unregister(ipython: Any) -> None:
    """Remove the magics (and the summaries' formatters) registered by ``register``."""
    from recfn.notebook_ext import frames

    frames.unregister(ipython)
    magics = ipython.magics_manager.magics
    for kind in ("line", "cell"):
        magics[kind].pop(MAGIC_NAME, None)
    ipython.magics_manager.registry.pop(RecordFunctionMagics.__name__, None)
