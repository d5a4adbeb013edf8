"""``recfn codegen ...``: handed to ``recfn.instrumentation.codegen``, which parses its own arguments."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from recfn.cli._common import Parser, exit_code


def add_parser(commands: argparse._SubParsersAction[Parser]) -> Parser:
    """The ``codegen`` subcommand's parser, added to ``commands`` (the subparsers of ``recfn``)."""
    return commands.add_parser(
        "codegen", help="generate recfn instrumentation (recfn codegen --help)", add_help=False
    )


def run(argv: Sequence[str]) -> int:
    """``recfn codegen ...``: handed to ``recfn.instrumentation.codegen.main``."""
    from recfn.instrumentation import codegen

    try:
        result = codegen.main(list(argv))
    except SystemExit as exc:  # argparse's --help and usage errors inside codegen
        return exit_code(exc.code)
    return int(result or 0)
