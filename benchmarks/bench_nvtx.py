"""Cost of forwarding ranges to NVTX, as ratios to the CPU-only profile measured in the same process.

Run: ``python benchmarks/bench_nvtx.py`` (``--ranges N`` to change the workload size; needs
``pip install 'recfn[gpu]'``). The workload is ``N`` ranges nested two deep (``step`` > ``forward``).
Cases are timed in interleaved rounds and the best round is kept.

Two settings, each in its own process because NVTX looks for a tool once, at its first call:
no NVTX tool attached (a plain run: what users pay when not under Nsight), and a do-nothing tool
attached (tests/gpu/nvtx_injection.c built with gcc, logging off: recfn's own forwarding cost
plus NVTX's dispatch, without any tool's work; skipped without gcc or the nvidia-nvtx-cu12 headers).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Optional

import recfn

ROOT = Path(__file__).resolve().parent.parent
Loop = Callable[[int], None]


def workload(n: int) -> None:
    record_function = recfn.record_function
    for _ in range(n // 2):
        with record_function("step"), record_function("forward"):
            pass


def profiled(**options: object) -> Loop:
    def loop(n: int) -> None:
        with recfn.profile(max_events=n + 10, **options):  # type: ignore[arg-type]
            workload(n)

    return loop


def forwarded_only(n: int) -> None:
    with recfn.emit_nvtx():
        workload(n)


def bare_nvtx(n: int) -> None:
    """The nvtx package's own push/pop with cached attributes: the floor for any forwarder."""
    import nvtx

    domain = nvtx.get_domain("bench")
    step = domain.get_event_attributes(message="step")
    forward = domain.get_event_attributes(message="forward")
    push, pop = domain.push_range, domain.pop_range
    for _ in range(n // 2):
        push(step)
        push(forward)
        pop()
        pop()


def best_ns(loops: dict[str, Loop], n: int, rounds: int) -> dict[str, float]:
    """Best ns per range of each loop over ``rounds`` interleaved rounds."""
    best = {name: float("inf") for name in loops}
    for _ in range(rounds):
        for name, loop in loops.items():
            gc.collect()
            start = time.perf_counter_ns()
            loop(n)
            best[name] = min(best[name], (time.perf_counter_ns() - start) / n)
    return best


def measure(n: int, rounds: int) -> dict[str, float]:
    return best_ns(
        {
            "profile()": profiled(),
            "profile(nvtx=True)": profiled(nvtx=True),
            "emit_nvtx() alone": forwarded_only,
            "nvtx package push/pop alone": bare_nvtx,
        },
        n,
        rounds,
    )


@contextlib.contextmanager
def injection_library() -> Iterator[Optional[Path]]:
    """The test suite's NVTX tool, built into a temporary folder (None without gcc or headers)."""
    gcc = shutil.which("gcc")
    spec = importlib.util.find_spec("nvidia")
    bases = list(spec.submodule_search_locations or []) if spec else []
    includes = [Path(b) / "nvtx" / "include" for b in bases]
    include = next((i for i in includes if (i / "nvtx3" / "nvToolsExt.h").is_file()), None)
    if gcc is None or include is None:
        yield None
        return
    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / "libinjection.so"
        source = ROOT / "tests" / "gpu" / "nvtx_injection.c"
        cmd = [gcc, "-O2", "-shared", "-fPIC", f"-I{include}", str(source), "-o", str(lib)]
        subprocess.run([*cmd, "-lpthread"], check=True)
        yield lib


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranges", type=int, default=200_000, help="ranges per timed loop")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (best kept)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # child process
    args = parser.parse_args(argv)
    if args.json:
        print(json.dumps(measure(args.ranges, args.rounds)))
        return 0

    settings: list[tuple[str, dict[str, float]]] = []
    settings.append(("no NVTX tool attached", measure(args.ranges, args.rounds)))
    with injection_library() as lib:
        if lib is None:
            print("(no gcc or NVTX headers: the 'tool attached' setting is skipped)")
        else:
            env = dict(os.environ, NVTX_INJECTION64_PATH=str(lib))
            env.pop("RECFN_NVTX_LOG", None)
            cmd = [sys.executable, __file__, "--json", f"--ranges={args.ranges}"]
            out = subprocess.run(
                [*cmd, f"--rounds={args.rounds}"], env=env, check=True, capture_output=True
            )
            settings.append(("do-nothing NVTX tool attached", json.loads(out.stdout)))

    print(
        f"recfn {recfn.__version__}, compiled={recfn.COMPILED}, Python {sys.version.split()[0]}, "
        f"{args.ranges:,} ranges per loop, best of {args.rounds}"
    )
    print()
    print("| setting | case | ns per range | ratio to profile() |")
    print("|---|---|---:|---:|")
    for setting, result in settings:
        base = result["profile()"]
        for case, ns in result.items():
            print(f"| {setting} | {case} | {ns:.0f} | {ns / base:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
