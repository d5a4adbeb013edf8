"""Hot-path cost of recfn ranges, as ratios to ``with contextlib.nullcontext():`` in one process.

Run: ``python benchmarks/bench_core.py`` (add ``--quick`` for a short run). Each case is timed in
interleaved rounds and the best round is kept, so the ratios stay meaningful on a noisy machine.
torch rows appear when ``torch`` is installed (``pip install torch==2.13.0``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import sys
import time
from collections.abc import Callable
from typing import Optional

import recfn
from recfn.engine.ranges import set_fast_path

Loop = Callable[[int], None]


def loop_empty(n: int) -> None:
    for _ in range(n):
        pass


def loop_nullcontext(n: int) -> None:
    nullcontext = contextlib.nullcontext
    for _ in range(n):
        with nullcontext():
            pass


def loop_record_function(n: int) -> None:
    record_function = recfn.record_function
    for _ in range(n):
        with record_function("x"):
            pass


def loop_record_function_fast(n: int) -> None:
    record_function_fast = recfn.record_function_fast
    for _ in range(n):
        with record_function_fast("x"):
            pass


def _plain() -> None:
    pass


@recfn.record_function("decorated")
def _decorated() -> None:
    pass


def loop_plain_call(n: int) -> None:
    for _ in range(n):
        _plain()


def loop_decorated_call(n: int) -> None:
    for _ in range(n):
        _decorated()


def slow_path(loop: Loop) -> Loop:
    """``loop`` with the native range fast path forbidden (the profiler's callbacks run)."""

    def run(n: int) -> None:
        set_fast_path(False)
        try:
            loop(n)
        finally:
            set_fast_path(True)

    return run


def best_ns(loop: Loop, n: int, rounds: int) -> float:
    """Best per-iteration time over ``rounds`` runs of ``loop(n)`` (the empty loop included)."""
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter_ns()
        loop(n)
        best = min(best, (time.perf_counter_ns() - start) / n)
    return best


def measure(cases: dict[str, Loop], n: int, rounds: int) -> dict[str, float]:
    """Time all cases in interleaved rounds; returns the best ns/iteration of each."""
    results = {name: float("inf") for name in cases}
    for _ in range(rounds):
        for name, loop in cases.items():
            results[name] = min(results[name], best_ns(loop, n, 1))
    return results


def at_depth(depth: int, loop: Loop, n: int) -> None:
    """Run ``loop(n)`` with ``depth`` more Python frames on the stack."""
    if depth == 0:
        loop(n)
    else:
        at_depth(depth - 1, loop, n)


def stack_cost(n: int, rounds: int, depth: int = 25) -> tuple[float, float]:
    """ns per range at Python depth ``depth``, profiler on with and without ``with_stack``
    (alternating rounds, each under a fresh profiler; the best round of each)."""
    best = {True: float("inf"), False: float("inf")}
    for _ in range(rounds):
        for with_stack in (True, False):
            with recfn.profile(with_stack=with_stack, max_events=n + 10):
                gc.collect()
                start = time.perf_counter_ns()
                at_depth(depth - 3, loop_record_function, n)  # the bench's own frames count
                elapsed = time.perf_counter_ns() - start
            best[with_stack] = min(best[with_stack], elapsed / n)
    return best[True], best[False]


def loop_cost(n: int, rounds: int) -> tuple[float, float]:
    """ns per range, profiler on, inside a running event loop and outside one (alternating
    rounds under one profiler, the empty loop's time taken off; the best round of each): how a
    Jupyter cell's ranges compare with a script's."""

    async def in_loop() -> float:
        return best_ns(loop_record_function, n, 1) - best_ns(loop_empty, n, 1)

    best = {"in": float("inf"), "out": float("inf")}
    with recfn.profile(max_events=2 * rounds * n + 10):
        for _ in range(rounds):
            best["in"] = min(best["in"], asyncio.run(in_loop()))
            out = best_ns(loop_record_function, n, 1) - best_ns(loop_empty, n, 1)
            best["out"] = min(best["out"], out)
    return best["in"], best["out"]


def torch_loops() -> dict[
    str, tuple[Loop, Callable[[], contextlib.AbstractContextManager[object]]]
]:
    try:
        import torch
        from torch._C._profiler import _RecordFunctionFast
    except ImportError:
        return {}

    def loop_torch_record_function(n: int) -> None:
        rf = torch.profiler.record_function
        for _ in range(n):
            with rf("x"):
                pass

    def loop_torch_fast(n: int) -> None:
        for _ in range(n):
            with _RecordFunctionFast("x"):
                pass

    def torch_profiler() -> contextlib.AbstractContextManager[object]:
        return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])

    return {
        "torch.profiler.record_function": (loop_torch_record_function, torch_profiler),
        "torch _RecordFunctionFast": (loop_torch_fast, torch_profiler),
    }


def run(n: int, rounds: int) -> list[tuple[str, float, float, Optional[str]]]:
    rows: list[tuple[str, float, float, Optional[str]]] = []

    def add(label: str, ns: float, base: float, target: Optional[str]) -> None:
        rows.append((label, ns, ns / base, target))

    # 1. nothing active
    recfn.clear_callbacks()
    r = measure(
        {
            "empty": loop_empty,
            "null": loop_nullcontext,
            "rf": loop_record_function,
            "fast": loop_record_function_fast,
            "plain": loop_plain_call,
            "deco": loop_decorated_call,
        },
        n,
        rounds,
    )
    null = r["null"] - r["empty"]
    add("with nullcontext() (baseline)", null, null, None)
    add("record_function, nothing active", r["rf"] - r["empty"], null, "<= 0.5x")
    add("record_function_fast, nothing active", r["fast"] - r["empty"], null, "<= 0.5x")
    add("decorator, added cost per call, nothing active", r["deco"] - r["plain"], null, "<= 2x")

    # 2. one thread-local callback sampled at 0.001
    calls = [0]

    def on_start(rf: recfn.RecordFunction) -> None:
        calls[0] += 1

    handle = recfn.add_thread_local_callback(
        recfn.RecordFunctionCallback(on_start, sampling_prob=0.001)
    )
    r = measure(
        {"empty": loop_empty, "null": loop_nullcontext, "rf": loop_record_function}, n, rounds
    )
    recfn.remove_callback(handle)
    null = r["null"] - r["empty"]
    add(
        "record_function, 1 thread-local callback sampled at 0.001",
        r["rf"] - r["empty"],
        null,
        "<= 1.2x",
    )

    # 3. profiler on
    with recfn.profile(max_events=50_000_000):
        r = measure(
            {
                "empty": loop_empty,
                "null": loop_nullcontext,
                "rf": loop_record_function,
                "fast": loop_record_function_fast,
                "plain": loop_plain_call,
                "deco": loop_decorated_call,
                "rf slow": slow_path(loop_record_function),
                "deco slow": slow_path(loop_decorated_call),
            },
            n,
            rounds,
        )
    null = r["null"] - r["empty"]
    add("record_function, profiler on", r["rf"] - r["empty"], null, "<= 1.5x")
    add(
        "record_function, profiler on, fast path off",
        r["rf slow"] - r["empty"],
        null,
        "(before the fast path)",
    )
    add(
        "record_function_fast, profiler on",
        r["fast"] - r["empty"],
        null,
        "<= 1.5x, <= record_function",
    )
    add(
        "decorator, added cost per call, profiler on",
        r["deco"] - r["plain"],
        null,
        "<= record_function",
    )
    add(
        "decorator, added cost per call, profiler on, fast path off",
        r["deco slow"] - r["plain"],
        null,
        "(before the fast path)",
    )

    # 3b. profiler on, inside a running event loop: how a Jupyter cell runs its code
    async def in_loop() -> dict[str, float]:
        return measure(
            {
                "empty": loop_empty,
                "null": loop_nullcontext,
                "rf": loop_record_function,
                "rf slow": slow_path(loop_record_function),
            },
            n,
            rounds,
        )

    with recfn.profile(max_events=50_000_000):
        r = asyncio.run(in_loop())
    null = r["null"] - r["empty"]
    add("record_function, profiler on, inside a running event loop", r["rf"] - r["empty"], null, "")
    add(
        "record_function, profiler on, inside a running event loop, fast path off",
        r["rf slow"] - r["empty"],
        null,
        "(before the fast path)",
    )

    inside, outside = loop_cost(n, rounds)
    rows.append(
        (
            "record_function, profiler on, inside a running event loop "
            "(x: the same outside a loop, in turns)",
            inside,
            inside / outside,
            "<= 1.2x",
        )
    )

    with_stack, without = stack_cost(n // 4, rounds)
    rows.append(
        (
            "record_function, profiler on, with_stack=True at depth 25 (x: the same without stacks)",
            with_stack,
            with_stack / without,
            "<= 3x",
        )
    )

    # 4. torch, under an active torch.profiler.profile
    loops = torch_loops()
    for label, (loop, make_profiler) in loops.items():
        with make_profiler():
            r = measure(
                {"empty": loop_empty, "null": loop_nullcontext, "torch": loop}, n // 4, rounds
            )
        null = r["null"] - r["empty"]
        add(f"{label}, torch.profiler on", r["torch"] - r["empty"], null, "recfn is cheaper")

    # 5. both profilers on at once, loops interleaved: recfn's ranges against torch's fast one
    if loops:
        loop, make_profiler = loops["torch _RecordFunctionFast"]
        with make_profiler(), recfn.profile(max_events=50_000_000):
            r = measure(
                {
                    "empty": loop_empty,
                    "torch": loop,
                    "rf": loop_record_function,
                    "fast": loop_record_function_fast,
                    "rf slow": slow_path(loop_record_function),
                },
                n // 4,
                rounds,
            )
        torch_ns = r["torch"] - r["empty"]
        for key, label in (
            ("rf", "record_function"),
            ("fast", "record_function_fast"),
            ("rf slow", "record_function with the fast path off"),
        ):
            rows.append(
                (
                    f"{label}, both profilers on (x: torch _RecordFunctionFast)",
                    r[key] - r["empty"],
                    (r[key] - r["empty"]) / torch_ns,
                    "<= 0.5x" if key != "rf slow" else "(before the fast path)",
                )
            )
    return rows


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    args = parser.parse_args(argv)
    n, rounds = (50_000, 3) if args.quick else (200_000, 7)
    rows = run(n, rounds)
    print(f"recfn {recfn.__version__}, compiled={recfn.COMPILED}, Python {sys.version.split()[0]}")
    print()
    print("| case | ns/iter | x nullcontext (unless the case says) | target |")
    print("|---|---:|---:|---|")
    for label, ns, ratio, target in rows:
        print(f"| {label} | {ns:.0f} | {ratio:.2f}x | {target or ''} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
