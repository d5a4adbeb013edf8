"""Profiler capture cost, memory, consolidation and file size; peers side by side when installed.

Run: ``python benchmarks/bench_profiler.py`` (``--ranges N`` to change the workload size).
The workload is ``N`` ranges on one thread, nested two deep (``step`` > ``forward``), recorded
with the profiler on. Memory is the growth of the process's resident set while capturing,
divided by the number of events. Peers (``pip install viztracer opentelemetry-sdk``) run the
same loop in the same process: VizTracer's ``log_event`` and OpenTelemetry's in-memory spans.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Optional

import recfn
from recfn.capture._table import build_table


def rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def workload(n: int) -> None:
    record_function = recfn.record_function
    for _ in range(n // 2):
        with record_function("step"), record_function("forward"):
            pass


def loop_nullcontext(n: int) -> None:
    nullcontext = contextlib.nullcontext
    for _ in range(n // 2):
        with nullcontext(), nullcontext():
            pass


def per_event_ns(loop: Callable[[int], None], n: int) -> float:
    start = time.perf_counter_ns()
    loop(n)
    return (time.perf_counter_ns() - start) / n


def viztracer_loop() -> Optional[Callable[[int], None]]:
    try:
        from viztracer import VizTracer
    except ImportError:
        return None

    def loop(n: int) -> None:
        tracer = VizTracer(tracer_entries=n + 10, verbose=0)
        tracer.start()
        log_event = tracer.log_event
        for _ in range(n // 2):
            with log_event("step"), log_event("forward"):
                pass
        tracer.stop()
        tracer.clear()

    return loop


def otel_loop() -> Optional[Callable[[int], None]]:
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        return None

    def loop(n: int) -> None:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        tracer = provider.get_tracer("bench")
        start = tracer.start_as_current_span
        for _ in range(n // 2):
            with start("step"), start("forward"):
                pass

    return loop


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranges", type=int, default=1_000_000, help="ranges in the workload")
    args = parser.parse_args(argv)
    n = args.ranges
    rows: list[tuple[str, str, str]] = []

    # capture: memory and time
    gc.collect()
    before = rss_bytes()
    prof = recfn.profile(max_events=n + 10)
    prof.start()
    capture_ns = per_event_ns(workload, n)
    held = rss_bytes() - before
    recorder = prof._recorder
    assert recorder is not None
    start = time.perf_counter()
    prof.stop()
    stop_s = time.perf_counter() - start
    start = time.perf_counter()
    table = build_table(recorder, start_ns=0, node_id=-1, config=prof.config.to_dict(), wall_ns=0)
    consolidate_s = time.perf_counter() - start
    events = table.num_rows
    del table
    start = time.perf_counter()
    table = build_table(recorder, start_ns=0, node_id=-1, config=prof.config.to_dict(), wall_ns=0)
    again_s = time.perf_counter() - start
    null_ns = per_event_ns(loop_nullcontext, n)
    rows.append(
        (
            "capture, ns per range (profiler on)",
            f"{capture_ns:.0f}",
            f"{capture_ns / null_ns:.2f}x nullcontext",
        )
    )
    rows.append(
        ("memory held while capturing, bytes per event", f"{held / events:.1f}", "target <= 24")
    )
    rows.append(
        (
            "consolidate into one pyarrow.Table, ms",
            f"{consolidate_s * 1e3:.0f}",
            f"{events:,} events (decodes the 24-byte rows); target <= 50 ms",
        )
    )
    rows.append(
        (
            "the same again, into pages the first one freed, ms",
            f"{again_s * 1e3:.0f}",
            "the difference is the cost of fresh pages",
        )
    )
    rows.append(
        (
            "profile.stop() including consolidation, ms",
            f"{stop_s * 1e3:.0f}",
            "first stop also imports pyarrow",
        )
    )

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.parquet")
        start = time.perf_counter()
        prof.save(path)
        save_s = time.perf_counter() - start
        size = os.path.getsize(path)
        start = time.perf_counter()
        recfn.load(path)
        load_s = time.perf_counter() - start
    rows.append(("Parquet size, bytes per event", f"{size / events:.2f}", "target <= 12"))
    rows.append(
        (
            "save / load, ms",
            f"{save_s * 1e3:.0f} / {load_s * 1e3:.0f}",
            "page checksums, content hash and event checks included",
        )
    )
    del prof, table, recorder
    gc.collect()

    peer_n = min(n, 200_000)
    recfn_ns = per_event_ns(lambda k: _profiled(workload, k), peer_n)
    for label, loop in (
        ("VizTracer log_event", viztracer_loop()),
        ("OpenTelemetry in-memory spans", otel_loop()),
    ):
        if loop is None:
            rows.append((f"{label} (not installed)", "-", ""))
            continue
        peer_ns = per_event_ns(loop, peer_n)
        rows.append(
            (
                f"{label}, ns per range",
                f"{peer_ns:.0f}",
                f"recfn is {peer_ns / recfn_ns:.1f}x faster",
            )
        )

    print(
        f"recfn {recfn.__version__}, compiled={recfn.COMPILED}, Python {sys.version.split()[0]}, {n:,} ranges"
    )
    print()
    print("| measure | value | note |")
    print("|---|---:|---|")
    for label, value, note in rows:
        print(f"| {label} | {value} | {note} |")
    return 0


def _profiled(loop: Callable[[int], None], n: int) -> None:
    with recfn.profile(max_events=n + 10):
        loop(n)


if __name__ == "__main__":
    sys.exit(main())
