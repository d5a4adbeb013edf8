"""Did it get slower? Two sets of runs of one workload compared per group, noise-aware.

The method, its assumptions and its limits are in docs/compare.md; in short:

* Each run gives, per group (a range name by default), its calls and the quantiles of its
  calls' durations. A group's time per run is taken as ``calls x lower quartile of a call``:
  the lower quartile ignores the calls that the operating system preempted, which on a shared
  machine inflate sums by tens of percent and move even the median of long ranges.
* Within a run, the machine's speed moves every group alike. Each run's common factor (the
  median, over groups, of how far the group's time in that run lies from its median over the
  side's runs) is taken out before the runs are summarised (a side's value of a group is the
  trimmed mean of its runs' values, `RUN_TRIM`), and the **common shift** between
  the two sides (the median over groups of the change of that same time) is taken out of every
  group's change. What is left, ``change``, is the group's change beyond what every group did;
  the common shift is reported once, with the run-to-run noise in its interval.
* Intervals come from the bootstrap: over runs (each side's runs resampled with replacement,
  the same runs for every group) when both sides have two runs or more; over calls (a side's
  calls pooled and resampled) otherwise. Over runs, the drift between the two sides' blocks
  of runs, which no resample within a side sees, is added to their standard error (`DRIFT`
  times the group's run-to-run spread, in quadrature, times how far apart in time the sides
  were recorded: nearly nothing for runs that took turns), so intervals stop narrowing when runs
  are many. That standard error, times Student's quantile (`degrees_of_freedom`: the fewer
  runs per side - 1 for blocks, both sides' runs - 2 for runs taken in turns) at the
  Bonferroni-corrected level, makes each interval: together they hold with
  probability ``confidence``, so an A/A comparison flags no group at all in that share of
  repetitions.
* A group is ``slower``/``faster`` when its interval excludes zero and its change is at least
  its noise floor (``min_change``, or its run-to-run spread when larger); ``unchanged``
  otherwise; ``not enough data`` when it has fewer than ``min_runs`` runs (``min_calls``
  calls) on a side, or is on one side only.

Everything here is a pure function of `RunStats` (``recfn.analysis.stats.runs``); reading run
sets is ``recfn.analysis.runsets``.
"""

from __future__ import annotations

import inspect
import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Optional

import numpy as np
import pandas as pd

from recfn.analysis.columns import check_number
from recfn.analysis.stats.runs import CALL_QUANTILE_COLUMNS, RunStats
from recfn.analysis.units import format_ns, printable
from recfn.errors import RecfnTypeError, RecfnValueError, RunSetError

SLOWER, FASTER, UNCHANGED, NOT_ENOUGH = "slower", "faster", "unchanged", "not enough data"
VERDICTS: tuple[str, ...] = (SLOWER, FASTER, UNCHANGED, NOT_ENOUGH)
"""Every verdict, in the order a comparison's rows are sorted by."""

RUNS, CALLS = "runs", "calls"
"""The two ways intervals are made: bootstrap over runs, or over calls within runs."""

MIN_SPEED_GROUPS = 3
"""Groups needed to estimate a run's common speed and the common shift: with fewer, one
changed group would move the estimate as much as the others, so none is taken out."""

CALL_STATISTIC = "call_q1_ns"
"""The per-run statistic of a group's calls that stands for a typical call: the lower
quartile. Preemption only ever adds time to a call; on a loaded machine it reaches most calls
of a long range, and moves even their median with the load of the moment, less so their lower
quartile."""

NOISE_FLOOR = 1.0
"""A verdict needs a change of at least this many times the group's run-to-run spread (a
robust standard deviation of one run's value around its side's value, both sides pooled): a
change smaller than one run's own noise is not called, however many runs there are."""

DRIFT = 0.75
"""The drift between the baseline's block of runs and the candidate's, per group, as a multiple
of the group's run-to-run spread (a robust standard deviation of one run's value, speed taken
out, the two sides pooled). Runs recorded one block after the other share the machine's state
of their time: their values move together a little, by more than the spread within a block
shows, and the bootstrap within each side cannot see it. It is added (in quadrature) to each
interval's standard error, so intervals stop narrowing once runs are many. Measured here
(docs/benchmarks.md), the changes of A/A comparisons spread beyond their bootstrap standard
error by 0.4-0.9 times that run spread, whatever the number of runs, and more for short names
with few calls; 0.5 let 3 of 4 recordings flag some name in 1.5-4.5% of A/A comparisons at 20
runs per side, 0.75 one (2.0%). It is scaled by how far apart in time the two sides were
recorded (`time_separation`): runs that took turns (a baseline run, a candidate run, ...) shared
the machine's states, and the term all but vanishes; where the order is not known, it is whole."""

EARLIEST_CLOCK_NS = 10**18
"""Runs whose spans start before this (2001-09-09, in ns since the epoch) were not timed by a
wall clock (a Chrome trace's times counted from 0, say): the order they ran in is unknown."""

SHIFT_FROM_SELF = False
"""Whether the common shift is the median change of the groups' self time (median call) rather
than of the very statistic each group's change is measured by (`CALL_STATISTIC`). Measured
here (docs/benchmarks.md), the same statistic on both sides of the subtraction is what keeps
the load's different pull on a median and on a lower quartile out of the changes."""

RUN_TRIM = 0.2
"""A side's value of a group is the mean of its runs' values with this share of them dropped
from each end (a trimmed mean): as robust as the median to a run or two gone wild, and close
to the mean's precision, so smaller changes stand out at the same runs."""

CHUNK_CELLS = 4_000_000
"""Bootstrap replicates are computed this many cells (replicates x runs x groups) at a time."""

COLUMNS: tuple[str, ...] = (
    "runs_baseline",
    "runs_candidate",
    "calls_baseline",
    "calls_candidate",
    "total_ns_baseline",
    "total_iqr_ns_baseline",
    "total_ns_candidate",
    "total_iqr_ns_candidate",
    "call_ns_baseline",
    "call_iqr_ns_baseline",
    "call_ns_candidate",
    "call_iqr_ns_candidate",
    "share",
    "change",
    "change_low",
    "change_high",
    "verdict",
)
"""The columns of `Comparison.table`, after its group keys (the index)."""


@dataclass
class Shift:
    """The common shift: how every group's time moved together between the two sides."""

    change: float
    change_low: float
    change_high: float
    verdict: str
    groups: int
    """How many groups it was estimated from (their median)."""


@dataclass
class Comparison:
    """Two run sets compared per group: `table` (one row per group, `COLUMNS`), the common
    `shift`, and how the intervals were made. In a notebook it shows as a table with change bars
    and a differential flame view (``recfn.notebook_ext.compare_view``); ``str()`` is the
    terminal table."""

    table: pd.DataFrame
    shift: Shift
    keys: list[str]
    method: str
    confidence: float
    level: float
    """The confidence of each interval (Bonferroni: ``1 - (1 - confidence) / tests``)."""
    min_change: float
    runs: tuple[int, int]
    labels: tuple[str, str] = ("baseline", "candidate")
    notes: list[str] = field(default_factory=list)
    paths: Optional[Comparison] = None
    """The same comparison per call path (group ``path``, names joined by ``;``), when made:
    what the differential flame view draws."""
    options: Optional[dict[str, Any]] = None
    """The options it was made with (``confidence``, ``seed``, ...), for the same comparison
    per path."""
    sources: Any = None
    """What each side's runs were read from (``recfn.analysis.runsets.Run`` lists), for views
    that need more than the numbers."""
    separation: float = 1.0
    """How far apart in time the sides' runs were recorded (`time_separation`): 1 for one block
    after the other, or an order not known; near 0 for runs that took turns."""
    freedom: int = 0
    """Student's degrees of freedom of the intervals (`degrees_of_freedom`); 0 over calls,
    where the normal quantile is used."""

    def regressions(self, threshold: float = 0.0, min_share: float = 0.0) -> pd.DataFrame:
        """Rows (and the common shift, as a row named ``(common shift)``, with share 1) that
        are ``slower`` by more than `threshold` (a fraction: 0.05 for 5%) and stand for more
        than `min_share` of the workload."""
        table = self.table
        hit = (
            (table["verdict"] == SLOWER)
            & (table["change"] > threshold)
            & (table["share"].fillna(0.0) >= min_share)
        )
        found = table[hit]
        if self.shift.verdict == SLOWER and self.shift.change > threshold:
            row = pd.DataFrame(
                [
                    {
                        "share": 1.0,
                        "change": self.shift.change,
                        "change_low": self.shift.change_low,
                        "change_high": self.shift.change_high,
                        "verdict": SLOWER,
                    }
                ],
                index=_shift_index(self.keys),
            )
            found = pd.concat([row, found])
        return found

    def describe(self) -> str:
        """One line: the runs on each side, how intervals were made, their confidence."""
        base, cand = self.runs
        how = (
            "bootstrap over runs"
            if self.method == RUNS
            else "bootstrap over calls (one run on a side: run-to-run noise is not in the "
            "intervals)"
        )
        if self.method == RUNS and self.separation < 1.0:
            turns = "recorded in turns" if self.separation < 0.5 else "partly interleaved"
            how += f", the sides {turns} (separation {self.separation:.2f})"
        return (
            f"{self.labels[0]}: {base} run{'s' if base != 1 else ''} · {self.labels[1]}: "
            f"{cand} run{'s' if cand != 1 else ''} · {how} · {self.confidence:.0%} "
            f"family-wise (each interval {_percent_text(self.level)}) · changes under "
            f"{self.min_change:.1%} count as unchanged"
        )

    def shift_text(self) -> str:
        """The common shift in one line."""
        s = self.shift
        if s.verdict == NOT_ENOUGH:
            why = (
                "one run on a side: a change of the machine's speed cannot be told from one "
                "of the code"
                if self.method == CALLS
                else f"fewer than {MIN_SPEED_GROUPS} groups on both sides"
            )
            return f"common shift: not enough data ({why})"
        return (
            f"common shift (every group alike; on a shared machine often the machine): "
            f"{_signed(s.change)} [{_signed(s.change_low)}, {_signed(s.change_high)}] "
            f"{s.verdict}, from {s.groups} groups"
        )

    def to_text(self, top: Optional[int] = None, max_name_width: int = 60) -> str:
        """The terminal table: header line, one row per group, the common shift."""
        rows = _display_rows(self, top)
        body = _aligned(rows, max_name_width)
        more = len(self.table) - (len(rows) - 1)
        lines = [self.describe(), body]
        if more > 0:
            lines.append(f"... {more:,} more")
        lines.append(self.shift_text())
        lines += self.notes
        return "\n".join(lines)

    def to_markdown(self, top: Optional[int] = None) -> str:
        """The table as GitHub Markdown (for a CI comment)."""
        rows = _display_rows(self, top)
        more = len(self.table) - (len(rows) - 1)
        tail = ["", f"{more:,} more rows not shown."] if more > 0 else []
        notes = ["", *self.notes] if self.notes else []
        return "\n".join(
            [f"**{self.describe()}**", "", *_markdown(rows), *tail, "", self.shift_text(), *notes]
        )

    def to_csv(self) -> str:
        """Every column of `table`, the group keys first."""
        text: str = self.table.reset_index().to_csv(index=False)
        return text

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain JSON-able values."""
        rows = self.table.reset_index().astype(object)
        records = [
            {key: _plain(value) for key, value in row.items()}
            for row in rows.to_dict(orient="records")
        ]
        return {
            "baseline": self.labels[0],
            "candidate": self.labels[1],
            "runs": {"baseline": self.runs[0], "candidate": self.runs[1]},
            "method": self.method,
            "separation": self.separation,
            "degrees_of_freedom": self.freedom,
            "confidence": self.confidence,
            "interval_confidence": self.level,
            "min_change": self.min_change,
            "keys": list(self.keys),
            "common_shift": {k: _plain(v) for k, v in vars(self.shift).items()},
            "rows": records,
            "notes": list(self.notes),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    def __str__(self) -> str:
        return self.to_text(top=30)

    def __repr__(self) -> str:
        counts = self.table["verdict"].value_counts()
        found = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts.get(v, 0))
        return f"<recfn.Comparison {self.labels[0]} -> {self.labels[1]}: {found or 'no groups'}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else self.to_text(top=30))

    def _repr_html_(self) -> str:
        from recfn.formats import hooks

        if hooks.comparison_html_renderer is not None:
            return hooks.comparison_html_renderer(self)
        import html

        return f"<pre>{html.escape(self.to_text(top=30))}</pre>"


def compare_runs(
    baseline: Sequence[RunStats],
    candidate: Sequence[RunStats],
    *,
    confidence: float = 0.99,
    min_change: float = 0.01,
    resamples: int = 2000,
    seed: int = 0,
    min_runs: int = 3,
    min_calls: int = 5,
    labels: tuple[str, str] = ("baseline", "candidate"),
    tests_factor: int = 1,
) -> Comparison:
    """Compare two run sets group by group; see the module's docstring and docs/compare.md.

    ``tests_factor`` multiplies the number of intervals the Bonferroni correction divides by
    (`find_steps` compares several pairs at once). ``RunSetError`` when a side has no runs, the
    runs group by different keys, or the two sides have no group in common.
    """
    check_options(confidence, min_change, resamples, seed, min_runs, min_calls)
    for side, runs in zip(labels, (baseline, candidate)):
        if not runs:
            raise RunSetError(f"{side}: no runs to compare")
    keys = list(baseline[0].keys)
    for run in (*baseline, *candidate):
        if list(run.keys) != keys:
            raise RunSetError(f"runs grouped by {keys} and by {run.keys} cannot be compared")
    columns = _columns(baseline, candidate, labels, keys)
    method = RUNS if len(baseline) >= 2 and len(candidate) >= 2 else CALLS
    if method == CALLS and any(run.calls is None for run in (*baseline, *candidate)):
        raise RecfnValueError("a comparison over calls needs the runs' calls (keep_calls=True)")
    rng = np.random.default_rng(seed)
    apart = time_separation(baseline, candidate)
    base = _Side(baseline, columns)
    cand = _Side(candidate, columns)
    if method == RUNS:
        testable = (base.runs_with >= min_runs) & (cand.runs_with >= min_runs)
    else:
        testable = (base.all_calls >= min_calls) & (cand.all_calls >= min_calls)
    replicate = base.replicates_over_runs if method == RUNS else base.replicates_over_calls
    base_y, base_z, base_raw = replicate(testable, resamples, rng)
    replicate = cand.replicates_over_runs if method == RUNS else cand.replicates_over_calls
    cand_y, cand_z, cand_raw = replicate(testable, resamples, rng)

    point_y = cand.point_y - base.point_y
    point_z = cand.point_z - base.point_z
    eligible = testable & np.isfinite(point_z)
    if eligible.sum() >= MIN_SPEED_GROUPS:
        shift = float(np.median(point_z[eligible]))
        shift_replicates = np.median((cand_z - base_z)[:, eligible], axis=1)
    else:
        shift = 0.0
        shift_replicates = np.zeros(resamples)
    delta = point_y - shift
    delta_replicates = (cand_y - base_y) - shift_replicates[:, None]

    shift_tested = method == RUNS and eligible.sum() >= MIN_SPEED_GROUPS
    tests = int(testable.sum()) + int(shift_tested)
    alpha = (1.0 - confidence) / max(tests * tests_factor, 1)
    freedom = degrees_of_freedom(len(baseline), len(candidate), apart) if method == RUNS else 0
    z = _t_quantile(1.0 - alpha / 2, freedom)
    spread = _robust_sd(delta_replicates)
    least = math.log1p(min_change)
    floor = np.full(len(columns), least)
    if method == RUNS:
        run_noise = np.sqrt((base.run_spread**2 + cand.run_spread**2) / 2)
        run_noise = np.nan_to_num(run_noise, nan=0.0)
        spread = np.sqrt(spread**2 + (DRIFT * apart * run_noise) ** 2)
        floor = np.fmax(floor, NOISE_FLOOR * run_noise)
    low, high = delta - z * spread, delta + z * spread
    verdict = np.full(len(columns), NOT_ENOUGH, dtype=object)
    verdict[testable] = UNCHANGED
    verdict[testable & (low > 0) & (delta >= floor)] = SLOWER
    verdict[testable & (high < 0) & (delta <= -floor)] = FASTER

    if shift_tested:
        raw = float(np.median((cand.point_raw - base.point_raw)[eligible]))
        raw_replicates = np.median((cand_raw - base_raw)[:, eligible], axis=1)
        raw_spread = float(_robust_sd(raw_replicates[:, None])[0])
        raw_low, raw_high = raw - z * raw_spread, raw + z * raw_spread
        shift_verdict = (
            SLOWER
            if raw_low > 0 and raw >= least
            else FASTER
            if raw_high < 0 and raw <= -least
            else UNCHANGED
        )
        common = Shift(
            math.expm1(raw),
            math.expm1(raw_low),
            math.expm1(raw_high),
            shift_verdict,
            int(eligible.sum()),
        )
    else:
        common = Shift(math.nan, math.nan, math.nan, NOT_ENOUGH, int(eligible.sum()))

    table = _table(keys, columns, base, cand, delta, low, high, verdict, testable)
    notes = []
    if method == CALLS:
        notes.append(
            "intervals are over the calls within the runs: calls of one run share its machine "
            "state, so they understate run-to-run noise; record several runs per side for "
            "intervals over runs"
        )
    return Comparison(
        table=table,
        shift=common,
        keys=keys,
        method=method,
        confidence=confidence,
        level=1.0 - alpha,
        min_change=min_change,
        runs=(len(baseline), len(candidate)),
        labels=labels,
        notes=notes,
        separation=apart,
        freedom=freedom,
    )


def degrees_of_freedom(base_runs: int, cand_runs: int, separation: float) -> int:
    """Student's degrees of freedom of an interval over runs: ``min(runs) - 1`` for sides
    recorded one block after the other (``separation`` 1), ``base_runs + cand_runs - 2`` for
    runs that took turns (0), in proportion between. Runs taken in turns are draws from the
    same states of the machine: each side's spread around its own value is an independent
    estimate of one run-to-run noise, and the two pool, as in the two-sample t-test. A block
    recorded after another differs from it by drift that neither side's spread shows (the
    drift term covers it as a constant); there the smaller side's alone is kept, Welch's most
    cautious choice. Measured here (docs/benchmarks.md), the pooled count on block recordings
    let A/A comparisons flag some name in up to 2.0% of repetitions (1.5% at 20 runs on both),
    above the 1% aimed at; on recordings in turns it stayed at 0.5% and found more."""
    fewest = min(base_runs, cand_runs) - 1
    pooled = base_runs + cand_runs - 2
    return round(fewest + (1.0 - min(max(separation, 0.0), 1.0)) * (pooled - fewest))


def time_separation(baseline: Sequence[RunStats], candidate: Sequence[RunStats]) -> float:
    """How far apart in time the two sides' runs were recorded, which scales `DRIFT`: 1 for one
    block after the other, near 0 for runs that took turns (1/n for n strict turns each). It is
    the difference of the two sides' mean places in the order the runs ran, over what it is for
    two blocks (half the runs). The order is read from the runs' spans (`RunStats.span_ns`); where
    a span is unknown or not on the wall clock (`EARLIEST_CLOCK_NS`), or two runs overlap in time
    (recorded at once, or times that are not the clock's), it is not known and the separation
    is 1, as before spans were read."""
    runs = [*baseline, *candidate]
    spans = [run.span_ns for run in runs if run.span_ns is not None]
    if not runs or len(spans) < len(runs) or min(start for start, _ in spans) < EARLIEST_CLOCK_NS:
        return 1.0
    order = sorted(range(len(spans)), key=lambda at: spans[at][0])
    if any(spans[later][0] < spans[earlier][1] for earlier, later in zip(order, order[1:])):
        return 1.0
    place = np.empty(len(spans))
    place[order] = np.arange(len(spans))
    apart = abs(place[len(baseline) :].mean() - place[: len(baseline)].mean())
    return float(min(apart / (len(spans) / 2), 1.0))


def find_steps(
    run_sets: Sequence[Sequence[RunStats]],
    labels: Sequence[str],
    **options: Any,
) -> pd.DataFrame:
    """For run sets in order (one per commit, say): per group, the first set at which its time
    changed, compared with the set before it (asv's steps), with that change, its interval and
    verdict. Groups that never changed get ``unchanged`` (or ``not enough data`` when no pair
    had enough of it) and no step. The Bonferroni correction counts every pair. Columns:
    ``step`` (the label of the set where it changed), ``change``, ``change_low``,
    ``change_high``, ``verdict``, ``share`` (its largest share), ``change_overall`` (last set
    over first, relative to the common shift); ``attrs["labels"]`` the sets' labels."""
    if len(run_sets) < 2:
        raise RecfnValueError("finding steps needs at least two run sets")
    check_step_options(options)
    if len(labels) != len(run_sets):
        raise RecfnValueError(f"{len(run_sets)} run sets but {len(labels)} labels")
    pairs = len(run_sets) - 1
    found: dict[Any, dict[str, Any]] = {}
    order: list[Any] = []
    keys: list[str] = []
    for i in range(1, len(run_sets)):
        step = compare_runs(
            run_sets[i - 1],
            run_sets[i],
            labels=(labels[i - 1], labels[i]),
            tests_factor=pairs,
            **options,
        )
        keys = step.keys
        for key, row in step.table.iterrows():
            entry = found.get(key)
            if entry is None:
                entry = found[key] = {
                    "step": None,
                    "change": math.nan,
                    "change_low": math.nan,
                    "change_high": math.nan,
                    "verdict": NOT_ENOUGH,
                    "share": row["share"],
                }
                order.append(key)
            entry["share"] = np.nanmax([entry["share"], row["share"]])
            if entry["step"] is not None:
                continue
            if row["verdict"] in (SLOWER, FASTER):
                entry.update(
                    step=labels[i],
                    change=row["change"],
                    change_low=row["change_low"],
                    change_high=row["change_high"],
                    verdict=row["verdict"],
                )
            elif row["verdict"] == UNCHANGED:
                entry["verdict"] = UNCHANGED
    overall = compare_runs(
        run_sets[0], run_sets[-1], labels=(labels[0], labels[-1]), **options
    ).table["change"]
    table = pd.DataFrame([found[key] for key in order], index=_index(keys, order))
    table["change_overall"] = overall.reindex(table.index).to_numpy()
    table = table.sort_values(
        ["verdict", "share"],
        key=lambda c: c.map(VERDICTS.index) if c.name == "verdict" else -c.fillna(0),
        kind="stable",
    )
    table.attrs["labels"] = list(labels)
    return table


def _steps_rows(steps: pd.DataFrame, top: Optional[int]) -> list[list[str]]:
    head = ["Name", "Share", "First change at", "Change", "Interval", "Verdict", "First->last"]
    rows = [head]
    shown = steps if top is None else steps.head(top)
    for key, row in shown.iterrows():
        rows.append(
            [
                _key_text(key),
                _share_text(row["share"]),
                "-" if pd.isna(row["step"]) else printable(str(row["step"])),
                _signed(row["change"]),
                _interval(row["change_low"], row["change_high"]),
                str(row["verdict"]),
                _signed(row["change_overall"]),
            ]
        )
    return rows


def _steps_head(steps: pd.DataFrame) -> str:
    labels = steps.attrs.get("labels", [])
    return "run sets in order: " + " -> ".join(printable(str(label)) for label in labels)


def steps_text(steps: pd.DataFrame, top: Optional[int] = None, max_name_width: int = 60) -> str:
    """`find_steps`' table for a terminal."""
    return f"{_steps_head(steps)}\n{_aligned(_steps_rows(steps, top), max_name_width)}"


def steps_markdown(steps: pd.DataFrame, top: Optional[int] = None) -> str:
    """`find_steps`' table as GitHub Markdown."""
    return "\n".join([f"**{_steps_head(steps)}**", "", *_markdown(_steps_rows(steps, top))])


def steps_dict(steps: pd.DataFrame) -> dict[str, Any]:
    """`find_steps`' table as plain JSON-able values."""
    rows = steps.reset_index().astype(object)
    return {
        "run_sets": [str(label) for label in steps.attrs.get("labels", [])],
        "rows": [
            {key: _plain(value) for key, value in row.items()}
            for row in rows.to_dict(orient="records")
        ],
    }


def _markdown(rows: list[list[str]]) -> list[str]:
    """Rows (the first is the header) as a Markdown table, numbers right-aligned."""
    escape = [[cell.replace("|", "\\|") for cell in row] for row in rows]
    head = "| " + " | ".join(escape[0]) + " |"
    rule = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(rows[0]))) + "|"
    return [head, rule, *("| " + " | ".join(row) + " |" for row in escape[1:])]


# -- inside --------------------------------------------------------------------------------


def check_step_options(options: dict[str, Any]) -> None:
    """`find_steps`' options: `OPTIONS` only (RecfnTypeError naming the others), checked by
    `check_options`."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise RecfnTypeError(
            f"finding steps: no option(s) {unknown}; the options are {list(OPTIONS)}"
        )
    check_options(**options)


def check_options(
    confidence: float = 0.99,
    min_change: float = 0.01,
    resamples: int = 2000,
    seed: int | None = 0,
    min_runs: int = 3,
    min_calls: int = 5,
) -> None:
    """A comparison's options (`OPTIONS`, defaults as `compare_runs`'), checked before any run
    is read: RecfnTypeError for a value of the wrong type, RecfnValueError out of range."""
    for name, value in (("confidence", confidence), ("min_change", min_change)):
        check_number(value, name, "compare", fraction=True, optional=False)
    for name, value in (("resamples", resamples), ("min_runs", min_runs), ("min_calls", min_calls)):
        check_number(value, name, "compare", optional=False)
    check_number(seed, "seed", "compare")  # None: numpy's fresh entropy
    if seed is not None and seed < 0:
        raise RecfnValueError(f"seed must be >= 0 or None, got {seed}")
    if not 0.5 <= confidence < 1.0:
        raise RecfnValueError(f"confidence must be in [0.5, 1), got {confidence}")
    if not 0.0 <= min_change < 1.0:
        raise RecfnValueError(f"min_change must be in [0, 1), got {min_change}")
    if resamples < 100:
        raise RecfnValueError(f"resamples must be >= 100, got {resamples}")
    if min_runs < 2:
        raise RecfnValueError(f"min_runs must be >= 2, got {min_runs}")
    if min_calls < 2:
        raise RecfnValueError(f"min_calls must be >= 2, got {min_calls}")


OPTIONS: tuple[str, ...] = tuple(inspect.signature(check_options).parameters)
"""The options of a comparison (`compare_runs`'s, which `find_steps` passes on)."""


def _columns(
    baseline: Sequence[RunStats],
    candidate: Sequence[RunStats],
    labels: tuple[str, str],
    keys: list[str],
) -> dict[tuple[Any, ...], int]:
    """Every group of either side, numbered (the baseline's first); ``RunSetError`` when the
    sides share none."""
    sides = []
    for runs in (baseline, candidate):
        seen: dict[tuple[Any, ...], None] = {}
        for run in runs:
            for values in zip(*(run.table[key].tolist() for key in keys)):
                seen.setdefault(values, None)
        sides.append(seen)
    if sides[0] and sides[1] and not any(key in sides[1] for key in sides[0]):
        raise RunSetError(
            f"the run sets share no {'/'.join(keys)}: different workloads? "
            f"{labels[0]} has {_examples(sides[0])}; {labels[1]} has {_examples(sides[1])}"
        )
    for side, seen in zip(labels, sides):
        if not seen:
            raise RunSetError(f"{side}: the runs hold no closed ranges")
    merged = dict.fromkeys([*sides[0], *sides[1]])
    return {key: i for i, key in enumerate(merged)}


def _examples(groups: dict[tuple[Any, ...], None]) -> str:
    shown = [printable(_key_text(key)) for key in list(groups)[:3]]
    more = len(groups) - len(shown)
    return f"{len(groups)} ({', '.join(shown)}{', ...' if more > 0 else ''})"


class _Side:
    """One side's runs as matrices (runs x groups), NaN where a run lacks a group."""

    def __init__(self, runs: Sequence[RunStats], columns: dict[tuple[Any, ...], int]) -> None:
        n, m = len(runs), len(columns)
        self.runs = runs
        self.columns = columns
        values = {name: np.full((n, m), np.nan) for name in _MATRICES}
        for r, run in enumerate(runs):
            table = run.table
            where = [columns[k] for k in zip(*(table[key].tolist() for key in run.keys))]
            for name in _MATRICES:
                values[name][r, where] = table[name].to_numpy(dtype=np.float64)
        self.calls = values["calls"]
        self.total = values["total_ns"]
        self.median = values["call_median_ns"]
        self.typical = values[CALL_STATISTIC]
        self.self_median = values["call_self_median_ns"]
        self.iqr = values["call_q3_ns"] - values["call_q1_ns"]
        self.workload = np.array([run.workload_ns for run in runs], dtype=np.float64)
        self.runs_with = np.sum(self.calls > 0, axis=0)
        self.all_calls = np.nansum(self.calls, axis=0)
        self.point_y = np.full(m, np.nan)
        self.point_z = np.full(m, np.nan)
        self.point_raw = np.full(m, np.nan)
        self.pooled_median = np.full(m, np.nan)
        self.pooled_iqr = np.full(m, np.nan)
        self.run_spread = np.full(m, np.nan)
        """Per group, a robust standard deviation of a run's (log) value around the side's
        value, each run's speed taken out (over runs only)."""

    # runs: per-run values, the run's common speed taken out, medians over resampled runs

    def replicates_over_runs(
        self, testable: np.ndarray, resamples: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Bootstrap replicates (resamples x groups) of the side's log time per run (``y``),
        log self time per run (``z``), both with each run's speed taken out, and ``z`` as
        measured; the point estimates go to ``point_*``."""
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.log(np.fmax(self.calls * self.typical, 1.0))
            own = self.self_median if SHIFT_FROM_SELF else self.typical
            z = np.log(np.fmax(self.calls * own, 1.0))
        absent = ~(self.calls > 0)
        y[absent] = np.nan
        z[absent] = np.nan
        speed = _run_speeds(y)
        y_norm = y - speed[:, None]
        z_norm = z - speed[:, None]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN groups stay NaN
            self.point_y = _location(y_norm)
            self.point_z = _location(z_norm)
            self.point_raw = _location(z)
            deviation = np.abs(y_norm - self.point_y)
            self.run_spread = 1.4826 * np.nanmedian(deviation, axis=0)
        n, m = y.shape
        out = [np.full((resamples, m), np.nan) for _ in range(3)]
        wanted = np.flatnonzero(testable)
        if not wanted.size:
            return out[0], out[1], out[2]
        step = max(1, CHUNK_CELLS // max(n * wanted.size, 1))
        for lo in range(0, resamples, step):
            hi = min(lo + step, resamples)
            picks = rng.integers(0, n, size=(hi - lo, n))
            for target, values in zip(out, (y_norm, z_norm, z)):
                chosen = values[:, wanted][picks]  # (replicates, runs, groups)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    target[lo:hi, wanted] = _location(chosen, axis=1)
        return out[0], out[1], out[2]

    # calls: every call of the side pooled, medians of resampled calls

    def replicates_over_calls(
        self, testable: np.ndarray, resamples: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As `replicates_over_runs`, each group's calls (all runs pooled) resampled."""
        m = len(self.columns)
        pooled_y = [np.full((resamples, m), np.nan) for _ in range(2)]
        per_run = np.nansum(self.calls, axis=0) / max(len(self.runs), 1)
        keys = list(self.columns)
        for g in range(m):
            times = [run.calls[keys[g]] for run in self.runs if run.calls and keys[g] in run.calls]
            if not times:
                continue
            durations = _merged([t.durations for t in times])
            selfs = _merged([t.self_times for t in times])
            scale = math.log(max(per_run[g], 1e-300))
            median, self_median = _median(durations), _median(selfs)
            self.pooled_median[g] = median
            self.pooled_iqr[g] = _quantile(durations, 0.75) - _quantile(durations, 0.25)
            self.point_y[g] = scale + math.log(max(median, 1.0))
            self.point_z[g] = scale + math.log(max(self_median, 1.0))
            if testable[g]:
                pooled_y[0][:, g] = scale + np.log(
                    np.fmax(_median_replicates(durations, resamples, rng), 1.0)
                )
                pooled_y[1][:, g] = scale + np.log(
                    np.fmax(_median_replicates(selfs, resamples, rng), 1.0)
                )
        self.point_raw = self.point_z
        return pooled_y[0], pooled_y[1], pooled_y[1]

    def shares(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            share = self.total / self.workload[:, None]
        share[~np.isfinite(share)] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            found: np.ndarray = np.nanmedian(share, axis=0)
        return found


_MATRICES = (
    "calls",
    "total_ns",
    *CALL_QUANTILE_COLUMNS,
    "call_low_mean_ns",
    "call_self_median_ns",
)


def _t_quantile(p: float, freedom: int) -> float:
    """Student's t quantile at `p` with `freedom` degrees of freedom (the normal's for 0, i.e.
    infinitely many): exact up to 3 degrees, then the Cornish-Fisher expansion in 1/freedom
    (Abramowitz and Stegun 26.7.5), within about 1% at the levels used here."""
    z = NormalDist().inv_cdf(p)
    if freedom <= 0:
        return z
    if freedom == 1:
        return math.tan(math.pi * (p - 0.5))
    if freedom == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    if freedom == 3:  # the CDF in closed form, inverted by bisection
        low, high = 0.0, 1e6
        for _ in range(200):
            t = (low + high) / 2
            u = t / math.sqrt(3)
            cdf = 0.5 + (u / (1 + u * u) + math.atan(u)) / math.pi
            low, high = (t, high) if cdf < p else (low, t)
        return (low + high) / 2
    v = float(freedom)
    terms = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    )
    return z + sum(term / v ** (k + 1) for k, term in enumerate(terms))


def _location(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """The trimmed mean along `axis`, NaNs left out: the mean of the values left when
    `RUN_TRIM` of them (rounded down) are dropped from each end; the median when `RUN_TRIM` is
    0.5 or more. NaN where no value is finite."""
    if RUN_TRIM >= 0.5:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            median: np.ndarray = np.nanmedian(values, axis=axis)
        return median
    if np.isfinite(values).all():  # the usual case: every run has every group
        size = values.shape[axis]
        cut = math.floor(size * RUN_TRIM)
        if size - 2 * cut <= 0:
            return np.full(np.delete(values.shape, axis), np.nan)
        kept = np.sort(values, axis=axis).take(range(cut, size - cut), axis=axis)
        mean: np.ndarray = kept.mean(axis=axis)
        return mean
    ordered = np.moveaxis(np.sort(values, axis=axis), axis, -1)  # NaNs sort last
    count = np.sum(np.isfinite(ordered), axis=-1)
    cut = np.floor(count * RUN_TRIM).astype(np.int64)
    filled = np.where(np.isfinite(ordered), ordered, 0.0)
    sums = np.concatenate([np.zeros((*filled.shape[:-1], 1)), np.cumsum(filled, axis=-1)], -1)
    high = np.take_along_axis(sums, (count - cut)[..., None], -1)[..., 0]
    low = np.take_along_axis(sums, cut[..., None], -1)[..., 0]
    kept = count - 2 * cut
    with np.errstate(divide="ignore", invalid="ignore"):
        found: np.ndarray = np.where(kept > 0, (high - low) / kept, np.nan)
    return found


def _run_speeds(y: np.ndarray) -> np.ndarray:
    """Each run's common factor (log): the median over the groups that every run has of how
    far the run's value lies from the group's median; zeros with fewer such groups than
    `MIN_SPEED_GROUPS`."""
    everywhere = np.all(np.isfinite(y), axis=0)
    if everywhere.sum() < MIN_SPEED_GROUPS or len(y) < 2:
        return np.zeros(len(y))
    shared = y[:, everywhere]
    found: np.ndarray = np.median(shared - np.median(shared, axis=0), axis=1)
    return found


def _merged(parts: list[np.ndarray]) -> np.ndarray:
    if len(parts) == 1:
        return parts[0]
    return np.sort(np.concatenate(parts))


def _median(values: np.ndarray) -> float:
    """The median of sorted values."""
    return _quantile(values, 0.5)


def _quantile(values: np.ndarray, q: float) -> float:
    """Quantile `q` of sorted values (linear interpolation, as numpy's default)."""
    position = (len(values) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return float(values[low] + (values[high] - values[low]) * (position - low))


SMALL_SAMPLE = 400
"""Up to this many calls, bootstrap medians come from real resamples; beyond it, from the
order statistic whose rank a resample's median takes (normal around the middle rank with
standard deviation ``sqrt(n) / 2``: the binomial count of resampled values below it)."""


def _median_replicates(values: np.ndarray, resamples: int, rng: np.random.Generator) -> Any:
    """`resamples` bootstrap medians of the sorted `values`."""
    n = len(values)
    if n <= SMALL_SAMPLE:
        picks = rng.integers(0, n, size=(resamples, n))
        return np.median(values[picks], axis=1)
    rank = (n - 1) / 2 + rng.standard_normal(resamples) * math.sqrt(n) / 2
    lower = np.clip(np.floor(rank).astype(np.int64), 0, n - 1)
    upper = np.minimum(lower + 1, n - 1)
    weight = np.clip(rank - lower, 0.0, 1.0)
    return values[lower] * (1 - weight) + values[upper] * weight


def _robust_sd(replicates: np.ndarray) -> np.ndarray:
    """Per column, the spread of bootstrap replicates as a standard deviation: the
    interquartile range / 1.349 (a few wild replicates do not inflate it), the standard
    deviation where the quartiles coincide."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        q1, q3 = np.nanpercentile(replicates, [25, 75], axis=0)
        spread: np.ndarray = (q3 - q1) / 1.349
        flat = ~(spread > 0)
        if flat.any():
            spread[flat] = np.nanstd(replicates[:, flat], axis=0)
    return spread


def _table(
    keys: list[str],
    columns: dict[tuple[Any, ...], int],
    base: _Side,
    cand: _Side,
    delta: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    verdict: np.ndarray,
    testable: np.ndarray,
) -> pd.DataFrame:
    order = list(columns)
    data: dict[str, Any] = {}
    for suffix, side in (("baseline", base), ("candidate", cand)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            q1, q3 = np.nanpercentile(side.total, [25, 75], axis=0)
            data[f"runs_{suffix}"] = side.runs_with.astype(np.int64)
            data[f"calls_{suffix}"] = np.nanmedian(side.calls, axis=0)
            data[f"total_ns_{suffix}"] = np.nanmedian(side.total, axis=0)
            data[f"total_iqr_ns_{suffix}"] = q3 - q1
            if np.isfinite(side.pooled_median).any():
                data[f"call_ns_{suffix}"] = side.pooled_median
                data[f"call_iqr_ns_{suffix}"] = side.pooled_iqr
            else:
                data[f"call_ns_{suffix}"] = np.nanmedian(side.median, axis=0)
                data[f"call_iqr_ns_{suffix}"] = np.nanmedian(side.iqr, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        data["share"] = np.fmax(base.shares(), cand.shares())
    data["change"] = np.where(testable, np.expm1(delta), np.nan)
    data["change_low"] = np.where(testable, np.expm1(low), np.nan)
    data["change_high"] = np.where(testable, np.expm1(high), np.nan)
    data["verdict"] = verdict
    table = pd.DataFrame(data, index=_index(keys, order))[list(COLUMNS)]
    rank = table["verdict"].map(VERDICTS.index)
    size = np.where(
        table["verdict"].isin([SLOWER, FASTER]), -table["change"].abs(), -table["share"].fillna(0)
    )
    ordered = np.lexsort((size, rank.to_numpy()))
    return table.iloc[ordered]


def _index(keys: list[str], order: Sequence[Any]) -> pd.Index:
    if len(keys) == 1:
        return pd.Index([k[0] if isinstance(k, tuple) else k for k in order], name=keys[0])
    return pd.MultiIndex.from_tuples(list(order), names=keys)


def _shift_index(keys: list[str]) -> pd.Index:
    label = "(common shift)"
    if len(keys) == 1:
        return pd.Index([label], name=keys[0])
    return pd.MultiIndex.from_tuples([(label, *[""] * (len(keys) - 1))], names=keys)


# -- text ------------------------------------------------------------------------------------


def _display_rows(comparison: Comparison, top: Optional[int]) -> list[list[str]]:
    base, cand = comparison.labels
    head = [
        "/".join(k.replace("_", " ").title() for k in comparison.keys),
        "Share",
        "Calls",
        f"Time/run ({printable(base)})",
        f"Time/run ({printable(cand)})",
        "Change",
        "Interval",
        "Verdict",
    ]
    rows = [head]
    shown = comparison.table if top is None else comparison.table.head(top)
    for key, row in shown.iterrows():
        rows.append(
            [
                _key_text(key),
                _share_text(row["share"]),
                _calls_text(row["calls_baseline"], row["calls_candidate"]),
                _time_text(row["total_ns_baseline"], row["total_iqr_ns_baseline"]),
                _time_text(row["total_ns_candidate"], row["total_iqr_ns_candidate"]),
                _signed(row["change"]),
                _interval(row["change_low"], row["change_high"]),
                str(row["verdict"]),
            ]
        )
    return rows


def _aligned(rows: list[list[str]], max_name_width: int) -> str:
    rows = [[_clip(row[0], max_name_width), *row[1:]] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:])]
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([rule, line(rows[0]), rule, *(line(r) for r in rows[1:]), rule])


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def _key_text(key: Any) -> str:
    if isinstance(key, tuple):
        return " / ".join(printable(str(part)) for part in key)
    return printable(str(key))


def _signed(value: Any) -> str:
    number = _float(value)
    return "-" if math.isnan(number) else f"{number:+.1%}"


def _interval(low: Any, high: Any) -> str:
    a, b = _float(low), _float(high)
    return "-" if math.isnan(a) or math.isnan(b) else f"[{a:+.1%}, {b:+.1%}]"


def _share_text(value: Any) -> str:
    number = _float(value)
    return "-" if math.isnan(number) else f"{number:.1%}"


def _calls_text(base: Any, cand: Any) -> str:
    a, b = _float(base), _float(cand)
    shown = ["-" if math.isnan(v) else f"{v:,.0f}" for v in (a, b)]
    return shown[0] if shown[0] == shown[1] else f"{shown[0]} -> {shown[1]}"


def _time_text(median: Any, iqr: Any) -> str:
    a, b = _float(median), _float(iqr)
    if math.isnan(a):
        return "-"
    if math.isnan(b) or b == 0:
        return format_ns(a)
    return f"{format_ns(a)} ±{b / 2 / a:.0%}" if a else format_ns(a)


def _percent_text(level: float) -> str:
    digits = max(1, min(6, math.ceil(-math.log10(max(1.0 - level, 1e-12))) - 1))
    return f"{level:.{digits}%}"


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _plain(value: Any) -> Any:
    """A value for JSON: NaN and missing as None, numpy scalars as Python's."""
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(float(value)) or math.isinf(float(value)) else float(value)
    if value is None or (not isinstance(value, (list, tuple, dict)) and pd.isna(value)):
        return None
    if isinstance(value, (str, int, bool)):
        return value
    return str(value)
