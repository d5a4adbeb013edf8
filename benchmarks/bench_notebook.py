"""Zero-annotation ``%%record_function`` next to ``%%pyinstrument`` on the same pandas cell.

Run: ``python benchmarks/bench_notebook.py`` (``--rows N``, ``--loops N``, ``--repeat N``).
One IPython shell with both extensions loaded runs the same cell of plain pandas code (groupby,
merge, sort; no ranges of its own) plain and under each magic, the modes interleaved and each
the best of ``--repeat`` runs. "cell" is what the user waits for, display included; "x plain"
is that over the plain cell. For recfn the header's recording overhead (a lower bound: recorded
events times their calibrated cost) is printed beside the measured one (capture wall time less
the plain cell, best of the runs). Needs ``pip install 'recfn[bench]'`` (pyinstrument).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

SETUP = """\
import numpy as np, pandas as pd
rng = np.random.default_rng(0)
df = pd.DataFrame({{"k": rng.integers(0, 200, {rows}), "v": rng.random({rows}),
                   "w": rng.random({rows})}})
"""
CELL = """\
out = []
for i in range({loops}):
    g = df.groupby("k").agg({{"v": "mean", "w": "sum"}})
    m = df.merge(g, left_on="k", right_index=True, suffixes=("", "_g"))
    m["z"] = m["v"] * 2 + m["w_g"]
    out.append(m.sort_values("z").head(10))
result = pd.concat(out)
"""
MODES = [
    ("plain cell", ""),
    ("%%record_function (default: calls 4 deep)", "%%record_function bench\n"),
    ("%%record_function --quiet (capture only)", "%%record_function bench --quiet\n"),
    ("%%record_function --no-trace-calls", "%%record_function bench --no-trace-calls\n"),
    ("%%record_function --trace-calls (every depth)", "%%record_function bench --trace-calls\n"),
    ("%%pyinstrument", "%%pyinstrument\n"),
]


def run(ip: InteractiveShell, source: str) -> float:
    with capture_output():
        began = time.perf_counter()
        result = ip.run_cell(source)
        seconds = time.perf_counter() - began
    if not result.success:
        raise RuntimeError(f"cell failed: {result.error_in_exec or result.error_before_exec}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--loops", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import recfn
    from recfn.notebook_ext.capture import estimated_overhead_ns

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "recfn")
    ip.run_line_magic("load_ext", "pyinstrument")
    run(ip, SETUP.format(rows=args.rows))
    cell = CELL.format(loops=args.loops)
    run(ip, cell)  # warm caches and imports
    best = {label: float("inf") for label, _ in MODES}
    details: dict[str, Any] = {}
    for _ in range(args.repeat):
        for label, magic in MODES:
            best[label] = min(best[label], run(ip, magic + cell))
            trace = recfn.session().last
            if magic.startswith("%%record_function") and trace is not None:
                wall = min(trace.wall_ns, details.get(label, (0, 0, trace.wall_ns))[2])
                details[label] = (trace.events, estimated_overhead_ns(trace), wall)
                recfn.session().reset()
    plain = best["plain cell"]
    print(f"{args.rows:,} rows, {args.loops} loops, best of {args.repeat}, in one process")
    print()
    print("| mode | cell ms | x plain | events | header: overhead ≥ ms | measured ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, _ in MODES:
        events, estimate, wall = details.get(label, (None, None, None))
        measured = f"{(wall / 1e9 - plain) * 1e3:.0f}" if wall else ""
        print(
            f"| {label} | {best[label] * 1e3:.0f} | {best[label] / plain:.2f} "
            f"| {'' if events is None else f'{events:,}'} "
            f"| {'' if estimate is None else f'{estimate / 1e6:.0f}'} | {measured} |"
        )
    print()
    print(f"recfn core compiled with mypyc: {recfn.COMPILED}")


if __name__ == "__main__":
    main()
