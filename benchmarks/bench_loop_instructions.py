"""Instructions per range inside and outside a running asyncio event loop, profiler on.

Run: ``python benchmarks/bench_loop_instructions.py`` (needs valgrind). Timings on a shared
machine swing with its load; instruction counts do not. Each case runs under callgrind at two
sizes and the difference is divided by the extra ranges, so the interpreter's start and recfn's
import cancel out. bench_core.py's "inside a running event loop" row is the same comparison in
nanoseconds.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOAD = """
import asyncio, sys
import recfn

def ranges(n):
    for _ in range(n):
        with recfn.record_function("x"):
            pass

async def in_loop(n):
    ranges(n)

with recfn.profile(max_events=50_000_000):
    if sys.argv[1] == "in":
        asyncio.run(in_loop(int(sys.argv[2])))
    else:
        ranges(int(sys.argv[2]))
"""


def instructions(script: Path, where: str, n: int, out: Path) -> int:
    """Instructions the whole run of ``script where n`` executed, as callgrind counts them."""
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        + [sys.executable, str(script), where, str(n)],
        check=True,
        capture_output=True,
    )
    found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
    if found is None:
        raise SystemExit(f"no instruction total in {out}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", type=int, default=20_000)
    parser.add_argument("--large", type=int, default=120_000)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "workload.py"
        script.write_text(WORKLOAD)
        per_range = {}
        for where in ("out", "in"):
            counts = [
                instructions(script, where, n, Path(tmp) / f"cg.{where}.{n}")
                for n in (args.small, args.large)
            ]
            per_range[where] = (counts[1] - counts[0]) / (args.large - args.small)
    print("| range, profiler on | instructions per range | x outside a loop |")
    print("|---|---:|---:|")
    print(f"| outside an event loop | {per_range['out']:.0f} | 1.00x |")
    print(
        f"| inside a running event loop | {per_range['in']:.0f} | "
        f"{per_range['in'] / per_range['out']:.2f}x |"
    )


if __name__ == "__main__":
    main()
