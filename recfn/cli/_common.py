"""What the ``recfn`` subcommands share: exit codes, the parser that raises instead of exiting,
and the checks and outputs more than one subcommand uses."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from typing import Any, Optional

from recfn.errors import CLIError

PROG = "recfn"
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130

DEBUG_ENV = "RECFN_DEBUG"
"""``RECFN_DEBUG=1`` prints the traceback of an unexpected error before its one-line message."""


IMAGE_SUFFIXES = (".png", ".svg", ".pdf")

FORCE_HELP = "replace an existing file even if recfn did not write it"


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so main() owns every exit."""

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # `--by=--`: Python 3.11's argparse drops the "--" and gives the option an empty list,
        # which no option's check expects; the value is "--", as later Pythons read it.
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value
        return super()._get_values(action, arg_strings)

    def error(self, message: str) -> Any:
        command = self.prog[len(PROG) :].strip()
        where = f"{command}: " if command else ""
        raise CLIError(f"{where}{message} (see {self.prog} --help)", EXIT_USAGE)


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def load_trace(path: Any, clock_offsets: Any = None) -> Any:
    from recfn.formats.trace import load

    return load(path) if clock_offsets is None else load(path, clock_offsets=clock_offsets)


def check_image_path(path: str, what: str) -> str:
    if not path.lower().endswith(IMAGE_SUFFIXES):
        raise CLIError(f"{what}: {path!r} must end in {', '.join(IMAGE_SUFFIXES)}", EXIT_USAGE)
    check_folder(path, what)
    return path


def check_folder(path: str, what: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"{what}: folder {folder!r} does not exist")
    if os.path.isdir(path):
        raise CLIError(f"{what}: {path!r} is a folder")


def check_trace_path(path: str, what: str) -> str:
    from recfn.errors import CaptureError
    from recfn.notebook_ext.capture import check_output_path

    try:
        return check_output_path(path, what)
    except CaptureError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None


def check_positive(value: Optional[int], what: str) -> None:
    if value is not None and value <= 0:
        raise CLIError(f"{what} must be a positive integer, got {value}", EXIT_USAGE)


def summary_text(trace: Any, top: int, **kwargs: Any) -> str:
    from recfn.notebook_ext.display import table_text

    return table_text(trace, top, **kwargs)


TITLE_CHARS_PER_INCH = 10
"""Characters of the timeline's title per inch of figure width (matplotlib's 12 pt title)."""


def write_timeline(
    trace: Any,
    path: str,
    width: float = 12.0,
    title: Optional[str] = None,
    max_depth: Optional[int] = None,
    overwrite: bool = False,
) -> None:
    from recfn.formats.files import write_atomic
    from recfn.notebook_ext.display import header_text, new_figure

    fig = new_figure(trace.threads, width)
    ax = fig.add_subplot()
    # The header as the title, in lines of the figure's width: one long line widened the
    # image past `width` (the saved figure takes in all of its text).
    heading = title or textwrap.fill(header_text(trace), round(width * TITLE_CHARS_PER_INCH))
    kwargs: dict[str, Any] = {"title": heading}
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
        kind="image",
    )


def exit_code(code: object) -> int:
    if code is None:
        return EXIT_OK
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return EXIT_FAILURE


def subcommand_parser(parser: argparse.ArgumentParser, name: str) -> Parser:
    """The parser of the subcommand ``name`` inside ``parser`` (``build_parser()``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub: Parser = action.choices[name]
            return sub
    raise KeyError(name)
