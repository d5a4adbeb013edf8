"""GPU time per range with ``profile(cuda=True)``: how exact it is and what it costs.

Run: ``python benchmarks/bench_cuda.py`` on a machine with torch and a CUDA device (it says so and
exits 0 elsewhere). Three measurements, each in this one process:

1. Exactness: ``--ranges`` ranges each wrap a few matrix products; inside each range the same
   work is also bracketed by CUDA events taken by hand. recfn's ``device_duration_ns`` per range is
   compared with the hand-taken events (ratio and absolute difference).
2. CPU cost: ns per empty range under ``profile()`` and under ``profile(cuda=True)`` (each range
   then records two CUDA events), with new events and with the ones an earlier profile read,
   best of interleaved rounds.
3. GPU cost: wall time of a loop of small kernels, each in a range, with and without
   ``cuda=True`` (the events ride the same stream).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from typing import Any

import recfn


def exactness(torch: Any, ranges: int, size: int, reps: int) -> dict[str, float]:
    x = torch.randn(size, size, device="cuda")
    by_hand: dict[str, tuple[Any, Any]] = {}
    with recfn.profile(cuda=True) as prof:
        for i in range(ranges):
            with recfn.record_function(f"mm{i}"):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(reps):
                    x @ x
                end.record()
            by_hand[f"mm{i}"] = (start, end)
    torch.cuda.synchronize()
    table = prof.table
    gpu = dict(
        zip(table.column("name").to_pylist(), table.column("device_duration_ns").to_pylist())
    )
    ratios, diffs = [], []
    for name, (start, end) in by_hand.items():
        hand_ns = start.elapsed_time(end) * 1e6
        ratios.append(gpu[name] / hand_ns)
        diffs.append(abs(gpu[name] - hand_ns))
    return {
        "ranges": ranges,
        "median GPU ns per range (hand)": statistics.median(
            s.elapsed_time(e) * 1e6 for s, e in by_hand.values()
        ),
        "median ratio recfn / hand": statistics.median(ratios),
        "min ratio": min(ratios),
        "max ratio": max(ratios),
        "median |recfn - hand| ns": statistics.median(diffs),
        "max |recfn - hand| ns": max(diffs),
    }


def empty_ranges(n: int, **options: Any) -> float:
    record_function = recfn.record_function
    gc.collect()
    begin = time.perf_counter_ns()
    with recfn.profile(max_events=n + 10, **options):
        for _ in range(n):
            with record_function("r"):
                pass
    return (time.perf_counter_ns() - begin) / n


def cpu_cost(n: int, rounds: int) -> dict[str, float]:
    """Best ns per empty range: without events, with events made anew (the pool of events
    that earlier profiles read emptied first, as in a process's first profile) and with the
    pool's events recorded again (a later profile)."""
    from recfn.gpu import _cuda

    fresh, pooled = "profile(cuda=True), new events", "profile(cuda=True), pooled events"
    best = {"profile()": float("inf"), fresh: float("inf"), pooled: float("inf")}
    for _ in range(rounds):
        best["profile()"] = min(best["profile()"], empty_ranges(n))
        _cuda._POOLS.clear()
        best[fresh] = min(best[fresh], empty_ranges(n, cuda=True))
        best[pooled] = min(best[pooled], empty_ranges(n, cuda=True))
    return best


def kernel_loop(torch: Any, n: int, cuda: bool) -> float:
    x = torch.randn(256, 256, device="cuda")
    torch.cuda.synchronize()
    begin = time.perf_counter_ns()
    with recfn.profile(max_events=n + 10, cuda=cuda):
        for _ in range(n):
            with recfn.record_function("k"):
                x.mul_(1.0)
        torch.cuda.synchronize()
    return (time.perf_counter_ns() - begin) / n


def gpu_cost(torch: Any, n: int, rounds: int) -> dict[str, float]:
    best = {"kernels in ranges": float("inf"), "kernels in ranges, cuda=True": float("inf")}
    for _ in range(rounds):
        best["kernels in ranges"] = min(best["kernels in ranges"], kernel_loop(torch, n, False))
        key = "kernels in ranges, cuda=True"
        best[key] = min(best[key], kernel_loop(torch, n, True))
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranges", type=int, default=200, help="ranges checked for exactness")
    parser.add_argument("--size", type=int, default=2048, help="matrix size of the work")
    parser.add_argument("--reps", type=int, default=4, help="products per range")
    parser.add_argument("--empty", type=int, default=100_000, help="empty ranges per round")
    parser.add_argument("--kernels", type=int, default=20_000, help="small kernels per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("torch is not installed: nothing to measure")
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure")
        return 0
    print(
        f"recfn {recfn.__version__} ({'compiled' if recfn.COMPILED else 'pure'}), "
        f"Python {sys.version.split()[0]}, torch {torch.__version__}, "
        f"{torch.cuda.get_device_name()}"
    )
    print("\n| exactness (recfn's device_duration_ns vs CUDA events by hand) | value |")
    print("|---|---:|")
    for key, value in exactness(torch, args.ranges, args.size, args.reps).items():
        print(f"| {key} | {value:,.4g} |")
    cpu = cpu_cost(args.empty, args.rounds)
    base = cpu["profile()"]
    print("\n| CPU cost, empty ranges | ns per range | x profile() |")
    print("|---|---:|---:|")
    for key, ns in cpu.items():
        print(f"| {key} | {ns:.0f} | {ns / base:.2f}x |")
    gpu = gpu_cost(torch, args.kernels, args.rounds)
    base = gpu["kernels in ranges"]
    print("\n| wall time of a loop of small kernels | ns per kernel | x without events |")
    print("|---|---:|---:|")
    for key, ns in gpu.items():
        print(f"| {key} | {ns:.0f} | {ns / base:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
