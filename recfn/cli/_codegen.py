"""``recfn codegen MODULE -o traced_module.py``: the arguments of
``recfn.instrumentation.codegen``, parsed as every subcommand's (one-line errors), and its
writer."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from recfn.cli._common import EXIT_OK, EXIT_USAGE, Parser, exit_code
from recfn.errors import CLIError


def add_parser(commands: argparse._SubParsersAction[Parser]) -> Parser:
    """The ``codegen`` subcommand's entry in ``recfn --help``, added to ``commands`` (the
    subparsers of ``recfn``); `run` parses its arguments with codegen's own parser."""
    return commands.add_parser(
        "codegen", help="generate recfn instrumentation (recfn codegen --help)", add_help=False
    )


def run(argv: Sequence[str]) -> int:
    """``recfn codegen ...``: parsed by ``recfn.instrumentation.codegen.build_parser`` as a
    `Parser`, then written by its ``write``."""
    from recfn.instrumentation import codegen

    parser = codegen.build_parser(prog="recfn codegen", parser_class=Parser)
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:  # --help
        return exit_code(exc.code)
    try:
        codegen.write(args)
    except (ImportError, ValueError, TypeError) as exc:  # the module, --rename, --scope, --prefix
        raise CLIError(f"codegen: {exc}", EXIT_USAGE) from None
    return EXIT_OK
