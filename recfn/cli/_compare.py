"""``recfn compare BASELINE CANDIDATE [MORE...]``: did it get slower? Run sets compared per name,
noise-aware, as a table; ``--fail-on 5%`` makes it a gate for CI. With more than two run sets
(one per commit, in order) it reports the first set at which each name's time changed."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from recfn.cli._common import EXIT_OK, EXIT_USAGE, Parser, check_positive, out
from recfn.errors import CLIError, RecfnValueError, RunSetError

EXIT_REGRESSION = 3
"""``--fail-on`` found a regression (1 stays "bad input", 2 "bad usage")."""

FORMATS = ("text", "json", "csv", "md")


def add_parser(commands: argparse._SubParsersAction[Parser]) -> Parser:
    """The ``compare`` subcommand's parser, added to ``commands`` (the subparsers of ``recfn``)."""
    compare = commands.add_parser(
        "compare",
        help="did it get slower? compare run sets per name, noise-aware (a CI gate)",
        description="Compare a baseline run set with a candidate, per range name: time per run "
        "and per call on each side, the change with its confidence interval (bootstrap over "
        "runs, or over calls when a side has one run), a verdict and the share of the "
        "workload. A run set is a folder of runs (recfn run --repeat N -o runs/), a glob, or "
        "one trace or dataset. With more run sets (one per commit, in order), reports the "
        "first set at which each name's time changed. docs/compare.md explains the method.",
        allow_abbrev=False,
    )
    compare.add_argument("baseline", help="the baseline run set")
    compare.add_argument("candidate", help="the candidate run set")
    compare.add_argument(
        "more",
        nargs="*",
        default=[],  # optional: argparse names a "*" positional without a default as required
        help="further run sets, in order: report where each name changed",
    )
    compare.add_argument(
        "--format", choices=FORMATS, default="text", help="output format (default text)"
    )
    compare.add_argument(
        "--fail-on",
        metavar="PCT",
        help="exit with code 3 when a name (above --min-share) got significantly slower by "
        "more than PCT (5%% or 0.05)",
    )
    compare.add_argument(
        "--min-share",
        metavar="PCT",
        default="1%",
        help="--fail-on looks only at names with at least this share of the workload (default 1%%)",
    )
    compare.add_argument(
        "--fail-on-shift",
        action="store_true",
        help="--fail-on also fails when every name got slower together (the common shift; off "
        "by default: on a shared machine it is often the machine)",
    )
    compare.add_argument(
        "--by", default="name", metavar="COLUMN[,COLUMN]", help="group by (default name)"
    )
    compare.add_argument(
        "--confidence",
        type=float,
        default=0.99,
        metavar="P",
        help="family-wise confidence of the intervals (default 0.99)",
    )
    compare.add_argument(
        "--min-change",
        metavar="PCT",
        default="1%",
        help="smaller changes count as unchanged (default 1%%)",
    )
    compare.add_argument("--top", type=int, metavar="N", help="rows shown (default: all)")
    compare.add_argument(
        "--seed", type=int, default=0, metavar="N", help="bootstrap seed (default 0)"
    )
    return compare


def parse_share(text: str, what: str) -> float:
    """``5%`` or ``0.05`` as 0.05 (``recfn.analysis.runsets.parse_percent``); a usage error
    for anything else."""
    from recfn.analysis.runsets import parse_percent

    try:
        return parse_percent(text, what)
    except RecfnValueError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None


def run(args: argparse.Namespace) -> int:
    from recfn.analysis.runsets import compare, compare_steps

    check_positive(args.top, "--top")
    threshold = None if args.fail_on is None else parse_share(args.fail_on, "--fail-on")
    floor = parse_share(args.min_share, "--min-share")
    min_change = parse_share(args.min_change, "--min-change")
    keys = [key.strip() for key in args.by.split(",") if key.strip()]
    if not keys:
        raise CLIError("compare: --by needs a column", EXIT_USAGE)
    options: dict[str, Any] = {
        "by": keys[0] if len(keys) == 1 else keys,
        "confidence": args.confidence,
        "min_change": min_change,
        "seed": args.seed,
    }
    sources = [args.baseline, args.candidate, *args.more]
    try:
        if len(sources) > 2:
            steps = compare_steps(sources, labels=sources, **options)
            _print_steps(steps, args.format, args.top)
            return _steps_gate(steps, threshold, floor)
        comparison = compare(
            args.baseline, args.candidate, labels=(args.baseline, args.candidate), **options
        )
    except RunSetError as exc:
        raise CLIError(f"compare: {exc}") from None
    except RecfnValueError as exc:
        raise CLIError(f"compare: {exc}", EXIT_USAGE) from None
    _print_comparison(comparison, args.format, args.top)
    if threshold is None:
        return EXIT_OK
    found = comparison.regressions(threshold, floor)
    if not args.fail_on_shift:
        found = found[found.index.get_level_values(0) != "(common shift)"]
        if comparison.shift.verdict == "slower" and comparison.shift.change > threshold:
            sys.stderr.write(
                f"recfn: note: every name got slower together ({comparison.shift_text()}); "
                "--fail-on-shift fails on it\n"
            )
    if not len(found):
        return EXIT_OK
    listed = "; ".join(
        f"{_name(key)} {row['change']:+.1%} [{row['change_low']:+.1%}, {row['change_high']:+.1%}]"
        for key, row in found.iterrows()
    )
    noun = "range" if len(found) == 1 else "ranges"
    sys.stderr.write(
        f"recfn: {len(found)} {noun} got slower by more than {threshold:.1%} "
        f"({comparison.confidence:.0%} confidence; share >= {floor:.1%}): {listed}\n"
    )
    return EXIT_REGRESSION


def _name(key: Any) -> str:
    from recfn.analysis.units import printable

    if isinstance(key, tuple):
        return " / ".join(printable(str(part)) for part in key)
    return printable(str(key))


def _print_comparison(comparison: Any, form: str, top: int | None) -> None:
    if form == "json":
        out(comparison.to_json())
    elif form == "csv":
        sys.stdout.write(comparison.to_csv())
    elif form == "md":
        out(comparison.to_markdown(top))
    else:
        out(comparison.to_text(top))


def _print_steps(steps: Any, form: str, top: int | None) -> None:
    import json

    from recfn.analysis.stats.compare import steps_dict, steps_markdown, steps_text

    shown = steps if top is None else steps.head(top)
    if form == "json":
        out(json.dumps(steps_dict(shown), indent=2, allow_nan=False))
    elif form == "csv":
        sys.stdout.write(shown.reset_index().to_csv(index=False))
    elif form == "md":
        out(steps_markdown(steps, top))
    else:
        out(steps_text(steps, top))


def _steps_gate(steps: Any, threshold: float | None, floor: float) -> int:
    if threshold is None:
        return EXIT_OK
    hit = steps[
        (steps["verdict"] == "slower")
        & (steps["change"] > threshold)
        & (steps["share"].fillna(0) >= floor)
    ]
    if not len(hit):
        return EXIT_OK
    listed = "; ".join(
        f"{_name(key)} {row['change']:+.1%} [{row['change_low']:+.1%}, {row['change_high']:+.1%}] "
        f"at {row['step']}"
        for key, row in hit.iterrows()
    )
    sys.stderr.write(
        f"recfn: {len(hit)} range{'s' if len(hit) != 1 else ''} got slower by more than "
        f"{threshold:.1%}: {listed}\n"
    )
    return EXIT_REGRESSION
