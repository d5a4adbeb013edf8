"""Overhead of recfn's automatic instrumentation, measured side by side in one process.

    python benchmarks/bench_instrument.py

Prints a Markdown table of ratios:

* a function wrapped by ``recfn.instrument`` with no profiler active, against the unwrapped call
  inside one ``with recfn.record_function(...)`` (target <= 1.5x);
* the cost ``trace_calls`` adds per traced call, against VizTracer's on the same loop when
  viztracer is installed (target <= 1.5x on 3.11's ``sys.setprofile``, <= 1.0x on 3.12+'s
  ``sys.monitoring``). Run it with 3.11 and with 3.13;
* the same per traced C call with ``trace_c_calls`` (a builtin function and a bound C method),
  against VizTracer, which traces C calls by default (no target: shown for comparison);
* where the C hook reads the TSC (the kernel's clock is the TSC), both costs against the same
  hook reading clock_gettime instead.

Each variant runs in interleaved rounds and keeps its best round, so a busy machine skews all
variants alike. Takes well under a minute.
"""

from __future__ import annotations

import contextlib
import sys
import time
import types
from collections.abc import Callable, Iterator
from typing import Optional

import recfn
from recfn.capture import _tracer

ROUNDS = 9
CALLS = 200_000
TRACED_CALLS = 100_000


def _module() -> types.ModuleType:
    module = types.ModuleType("bench_target")
    exec(
        "def leaf(x):\n    return x\n\ndef loop(n):\n    for i in range(n):\n        leaf(i)\n\n"
        # one builtin function and one bound C method per iteration
        "def loop_c(n):\n    x = []\n    for i in range(n // 2):\n"
        "        len(x)\n        x.append(i)\n",
        vars(module),
    )
    return module


def best_of(variants: dict[str, Callable[[], float]], rounds: int = ROUNDS) -> dict[str, float]:
    """Run each variant once per round, interleaved; keep each one's fastest round (seconds)."""
    best = {name: float("inf") for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            best[name] = min(best[name], run())
    return best


def wrapper_overhead() -> list[tuple[str, float, float, Optional[float]]]:
    plain = _module()
    wrapped = _module()
    handle = recfn.instrument(wrapped, include=["leaf"])
    f, g = plain.leaf, wrapped.leaf
    record_function = recfn.record_function
    n = CALLS

    def unwrapped_plus_range() -> float:
        start = time.perf_counter()
        for i in range(n):
            with record_function("leaf"):
                f(i)
        return time.perf_counter() - start

    def wrapped_call() -> float:
        start = time.perf_counter()
        for i in range(n):
            g(i)
        return time.perf_counter() - start

    def unwrapped_call() -> float:
        start = time.perf_counter()
        for i in range(n):
            f(i)
        return time.perf_counter() - start

    def wrapped_profiled() -> float:
        with recfn.profile(max_events=2 * n):
            return wrapped_call()

    def plus_range_profiled() -> float:
        with recfn.profile(max_events=2 * n):
            return unwrapped_plus_range()

    t = best_of(
        {
            "plus_range": unwrapped_plus_range,
            "wrapped": wrapped_call,
            "plain": unwrapped_call,
            "profiled": wrapped_profiled,
            "plus_range_profiled": plus_range_profiled,
        }
    )
    handle.undo()
    ns = {k: v / n * 1e9 for k, v in t.items()}
    return [
        (
            "wrapped call, no profiler / (unwrapped call + `with record_function`)",
            ns["wrapped"],
            ns["plus_range"],
            1.5,
        ),
        ("wrapped call, no profiler / unwrapped call", ns["wrapped"], ns["plain"], None),
        (
            "both under `recfn.profile()`: wrapped call / (unwrapped call + `with record_function`)",
            ns["profiled"],
            ns["plus_range_profiled"],
            None,
        ),
    ]


def trace_overhead(c_calls: bool = False) -> list[tuple[str, float, float, Optional[float]]]:
    """ns added per traced call by ``trace_calls`` (with ``c_calls``: per traced C call, by
    ``trace_c_calls``) and by VizTracer, which traces C calls by default."""
    target = _module()
    loop = target.loop_c if c_calls else target.loop
    n = TRACED_CALLS

    def run(ctx: Callable[[], contextlib.AbstractContextManager[object]]) -> Callable[[], float]:
        def timed() -> float:
            with ctx():
                start = time.perf_counter()
                loop(n)
                return time.perf_counter() - start

        return timed

    def profile() -> recfn.profile:
        return recfn.profile(trace_calls=True, trace_c_calls=c_calls, max_events=4 * n)

    @contextlib.contextmanager
    def on_clock_gettime() -> Iterator[recfn.profile]:
        chosen, _tracer.NATIVE_TSC = _tracer.NATIVE_TSC, False
        try:
            with profile() as prof:
                yield prof
        finally:
            _tracer.NATIVE_TSC = chosen

    variants = {"base": run(contextlib.nullcontext), "recfn": run(profile)}
    tsc = _tracer.native_available() and _tracer._NATIVE.TSC
    if tsc:
        variants["clock_gettime"] = run(on_clock_gettime)
    try:
        from viztracer import VizTracer
    except ImportError:
        VizTracer = None
    if VizTracer is not None:

        @contextlib.contextmanager
        def viztracer() -> object:
            tracer = VizTracer(tracer_entries=4 * n, verbose=0)
            tracer.start()
            try:
                yield tracer
            finally:
                tracer.stop()
                tracer.clear()

        variants["viztracer"] = run(viztracer)
    t = best_of(variants)
    per_call = {k: (v - t["base"]) / n * 1e9 for k, v in t.items() if k != "base"}
    what = "trace_c_calls" if c_calls else "trace_calls"
    unit = "traced C call" if c_calls else "traced call"
    rows: list[tuple[str, float, float, Optional[float]]] = []
    if "viztracer" not in per_call:
        rows.append((f"{what}: added ns per {unit} (recfn alone)", per_call["recfn"], 1.0, None))
    else:
        target_ratio = None if c_calls else 1.0 if sys.version_info >= (3, 12) else 1.5
        rows.append(
            (
                f"{what} / VizTracer: added ns per {unit}",
                per_call["recfn"],
                per_call["viztracer"],
                target_ratio,
            )
        )
    if tsc:
        rows.append(
            (
                f"{what}, the hook on the TSC / on clock_gettime: added ns per {unit}",
                per_call["recfn"],
                per_call["clock_gettime"],
                None,
            )
        )
    return rows


def main() -> int:
    start = time.perf_counter()
    rows = wrapper_overhead() + trace_overhead() + trace_overhead(c_calls=True)
    version = ".".join(map(str, sys.version_info[:3]))
    mode = "compiled" if recfn.COMPILED else "pure Python"
    print(
        f"recfn instrumentation overhead (Python {version}, recfn {mode}, best of {ROUNDS} interleaved rounds)\n"
    )
    print("| measurement | ns | baseline ns | ratio | target |")
    print("|---|---:|---:|---:|---:|")
    for label, value, baseline, target in rows:
        ratio = value / baseline
        goal = "-" if target is None else f"<= {target}x {'ok' if ratio <= target else 'MISSED'}"
        base = f"{baseline:.0f}" if baseline != 1.0 else "-"
        print(f"| {label} | {value:.0f} | {base} | {ratio:.2f}x | {goal} |")
    print(f"\n({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
