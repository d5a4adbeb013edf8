"""Comparing run sets: how often an A/A comparison flags something (false positives), how often
injected slowdowns are found, at 5, 10 and 20 runs per side, on this machine; and what comparing
two run sets of 10 runs x 1M ranges costs. Markdown tables on stdout.

Run: ``python benchmarks/bench_compare.py`` (``--reps 200 --detect-reps 100``, ``--sizes 5 10
20``, ``--effects 0.02 0.05 0.10``, ``--speed-only``, ``--no-speed``, ``--save-runs FILE`` to keep
the recorded runs' statistics, ``--from-runs FILE`` to analyse kept ones again, ``--interleave``
to record the blocks in turns).

The workload is real code, profiled for real: a loop of steps, each with ranges ``load``,
``forward`` (four ``layer`` calls: about 20% of the run), ``backward``, ``optimizer`` and
``log`` around pure-Python loops. A slowdown of e is injected by giving the ``layer`` calls
(1 + e) times their work. Each repetition records, in this process, a block of baseline runs and
then candidate blocks in random order: the unchanged code (the A/A comparison) and, in the first
``--detect-reps`` repetitions, one block per injected slowdown. Blocks are recorded one after
the other, as CI records a baseline and later a candidate: the machine's drift between blocks is
part of the noise. With ``--interleave`` they take turns instead, one run of each at a time (in
a random order), as the loop of docs/compare.md records two sides: the comparison then sees
from the runs' spans that the sides were recorded in turns. A comparison at n runs per side
uses the first n runs of each block. Each run's statistics come from
``recfn.analysis.stats.runs.frame_stats`` of its profile, as ``recfn.compare`` computes them.

A/A "false positive": any group, or the common shift, other than ``unchanged``. Found: ``layer``
is ``slower``.

The speed part writes two run sets of 10 Parquet runs of 1M synthetic ranges each
(``make_synthetic_trace``) and times ``python -m recfn compare`` on them, each time in a fresh
interpreter (its wall time from start to exit, its CPU time and peak RSS from ``wait4``).
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import recfn
from recfn.analysis.stats.compare import FASTER, SLOWER, compare_runs
from recfn.analysis.stats.runs import (
    CALL_QUANTILE_COLUMNS,
    CALL_QUANTILES,
    LOW_TRIM,
    RunStats,
    frame_stats,
    sorted_quantiles,
    trimmed_mean,
)

ROOT = Path(__file__).resolve().parent.parent
STEPS = 10
UNIT = 1500
"""Loop iterations of one unit of work (about 0.1 ms of pure Python here)."""


def spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def workload(layer_factor: float) -> None:
    """Ten steps; ``layer`` (4 calls a step) is about 20% of the run."""
    layer_work = int(UNIT * layer_factor)
    for _ in range(STEPS):
        with recfn.record_function("step"):
            with recfn.record_function("load"):
                spin(3 * UNIT)
            with recfn.record_function("forward"):
                for _ in range(4):
                    with recfn.record_function("layer"):
                        spin(layer_work)
            with recfn.record_function("backward"):
                spin(7 * UNIT)
            with recfn.record_function("optimizer"):
                spin(2 * UNIT)
            with recfn.record_function("log"):
                spin(UNIT // 2)


KEEP_CALLS = False
"""``--keep-calls``: keep every run's calls in the saved runs (to try other statistics)."""


def record_run(layer_factor: float) -> RunStats:
    with recfn.profile() as prof:
        workload(layer_factor)
    return frame_stats(prof.to_pandas(), keep_calls=KEEP_CALLS)


def record(
    reps: int, detect_reps: int, block: int, effects: list[float], interleave: bool = False
) -> dict[str, Any]:
    """Per repetition: the baseline block, then the A/A block and the effect blocks in a random
    order; with ``interleave``, the blocks take turns instead, a run of each (in a random order)
    at a time. Returns every block's run statistics."""
    rng = np.random.default_rng(2026)
    record_run(1.0)  # warm up
    blocks: dict[str, Any] = {"base": [], "aa": [], **{f"e{e}": [] for e in effects}}
    started = time.perf_counter()
    for rep in range(reps):
        later = ["aa", *(f"e{e}" for e in effects)] if rep < detect_reps else ["aa"]
        if interleave:
            for name in ("base", *later):
                blocks[name].append([])
            for _ in range(block):
                for name in rng.permutation(["base", *later]).tolist():
                    blocks[name][-1].append(record_run(_factor(name)))
        else:
            blocks["base"].append([record_run(1.0) for _ in range(block)])
            for name in rng.permutation(later).tolist():
                blocks[name].append([record_run(_factor(name)) for _ in range(block)])
        if rep % 10 == 9:
            done = time.perf_counter() - started
            print(f"recorded {rep + 1}/{reps} repetitions in {done:.0f} s", file=sys.stderr)
    return blocks


def _factor(block: str) -> float:
    """The work ``layer`` gets in a block's runs: 1 for the baseline and A/A, 1 + e for "e<e>"."""
    return 1.0 if block in ("base", "aa") else 1.0 + float(block[1:])


def analyse(blocks: dict[str, Any], sizes: list[int], effects: list[float]) -> str:
    lines = [
        "| runs per side | A/A repetitions | A/A: some name flagged | A/A: common shift flagged | "
        + " | ".join(f"{e:.0%} slower found" for e in effects)
        + " |",
        "|---:|---:|---:|---:|" + "---:|" * len(effects),
    ]
    for n in sizes:
        base = blocks["base"]
        names, shifts = [], []
        which: dict[str, int] = {}
        for i, (b, a) in enumerate(zip(base, blocks["aa"])):
            found = compare_runs(b[:n], a[:n], seed=i)
            hit = found.table.index[found.table["verdict"].isin([SLOWER, FASTER])]
            for name in hit:
                which[str(name)] = which.get(str(name), 0) + 1
            names.append(bool(len(hit)))
            shifts.append(found.shift.verdict in (SLOWER, FASTER))
        flagged = ", ".join(f"`{k}` {v}" for k, v in sorted(which.items())) or "none"
        cells = [
            f"{n}",
            f"{len(names)}",
            f"{np.mean(names):.1%} ({sum(names)}: {flagged})",
            f"{np.mean(shifts):.1%} ({sum(shifts)})",
        ]
        for e in effects:
            found = [
                compare_runs(b[:n], c[:n], seed=i).table.loc["layer", "verdict"] == SLOWER
                for i, (b, c) in enumerate(zip(base, blocks[f"e{e}"]))
            ]
            cells.append(f"{np.mean(found):.0%} of {len(found)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def refresh(blocks: dict[str, Any]) -> None:
    """Runs saved by an older recfn, with their calls (``--keep-calls``): their quantile
    columns made again from the calls, so that today's statistics read them."""
    for block in blocks.values():
        for runs in block:
            for run in runs:
                if run.calls is None:
                    continue
                table = run.table
                found = [
                    sorted_quantiles(run.calls[key].durations, CALL_QUANTILES)
                    for key in zip(*(table[k].tolist() for k in run.keys))
                ]
                for i, name in enumerate(CALL_QUANTILE_COLUMNS):
                    table[name] = [values[i] for values in found]
                table["call_low_mean_ns"] = [
                    trimmed_mean(run.calls[key].durations, LOW_TRIM, is_sorted=True)
                    for key in zip(*(table[k].tolist() for k in run.keys))
                ]


def measure(base: str, cand: str) -> tuple[float, int, float, int]:
    """``recfn compare base cand --format csv`` as a user runs it (``python -m recfn``: the
    console script's path, from the interpreter's start to its exit): wall seconds, peak RSS
    in bytes, CPU seconds and the exit code."""
    command = [sys.executable, "-m", "recfn", "compare", base, cand, "--format", "csv"]
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return elapsed, usage.ru_maxrss * 1024, cpu, child.returncode


def write_run_sets(folder: str, runs: int, ranges: int) -> tuple[str, str]:
    from recfn.analysis import make_synthetic_trace
    from recfn.formats.trace import Trace

    sides = []
    for side, offset in (("base", 0), ("cand", 100)):
        path = os.path.join(folder, side)
        os.makedirs(path, exist_ok=True)
        for r in range(runs):
            frame = make_synthetic_trace(ranges, 8, seed=r + offset)
            Trace.from_pandas(frame).save(os.path.join(path, f"run-{r:02d}.parquet"))
        sides.append(path)
    return sides[0], sides[1]


def speed(runs: int, ranges: int, rounds: int) -> str:
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        base, cand = write_run_sets(folder, runs, ranges)
        written = time.perf_counter() - started
        lines = [
            "| step | seconds | CPU seconds | peak RSS MiB |",
            "|---|---:|---:|---:|",
            f"| write 2 x {runs} runs of {ranges:,} ranges | {written:.1f} | - | - |",
        ]
        for _ in range(rounds):
            seconds, rss, cpu, code = measure(base, cand)
            lines.append(
                f"| `recfn compare base/ cand/` (exit {code}) | {seconds:.2f} | "
                f"{cpu:.2f} | {rss / 2**20:,.0f} |"
            )
        return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--detect-reps", type=int, default=100)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 10, 20])
    parser.add_argument("--effects", type=float, nargs="+", default=[0.02, 0.05, 0.10])
    parser.add_argument("--save-runs", metavar="FILE")
    parser.add_argument("--from-runs", metavar="FILE")
    parser.add_argument("--keep-calls", action="store_true")
    parser.add_argument("--interleave", action="store_true")
    parser.add_argument("--speed-only", action="store_true")
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--speed-runs", type=int, default=10)
    parser.add_argument("--speed-ranges", type=int, default=1_000_000)
    parser.add_argument("--speed-rounds", type=int, default=3)
    args = parser.parse_args()
    global KEEP_CALLS
    KEEP_CALLS = args.keep_calls
    load = os.getloadavg()[0]
    print(f"load average at start: {load:.1f}; compiled: {recfn.COMPILED}\n")
    if not args.speed_only:
        if args.from_runs:
            with open(args.from_runs, "rb") as kept:
                blocks = pickle.load(kept)
            refresh(blocks)
        else:
            started = time.perf_counter()
            blocks = record(
                args.reps, args.detect_reps, max(args.sizes), args.effects, args.interleave
            )
            print(f"recorded in {time.perf_counter() - started:.0f} s\n")
            if args.save_runs:
                with open(args.save_runs, "wb") as out:
                    pickle.dump(blocks, out)
        print(analyse(blocks, args.sizes, args.effects))
        print()
    if not args.no_speed:
        print(speed(args.speed_runs, args.speed_ranges, args.speed_rounds))
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
