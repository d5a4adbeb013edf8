"""Zero-annotation ``%%record_function`` next to ``%%pyinstrument`` on the same pandas cell.

Run: ``python benchmarks/bench_notebook.py`` (``--rows N``, ``--repeat N``). One IPython shell
with both extensions loaded runs the same cell of plain pandas code (a row-wise
``DataFrame.apply(lambda row: ...)``, whose time goes into the lambda and the pandas calls it
makes; no ranges of its own) plain and under each magic, the modes interleaved and each the best
of ``--repeat`` runs. "cell" is what the user waits for, display included; "x plain" is that over
the plain cell. For recfn the recording overhead the header states is printed beside the
measured one (that mode's cell less the plain cell), and the default's top rows show that it
names the lambda and its pandas callees with exact counts. Needs ``pip install 'recfn[bench]'``
(pyinstrument).
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
df = pd.DataFrame({{"a": rng.random({rows}), "b": rng.random({rows})}})
"""
CELL = """\
scores = df.apply(lambda row: row.a * 2 + row["b"], axis=1)
"""
MODES = [
    ("plain cell", ""),
    ("%%record_function (default: your code at any depth)", "%%record_function bench\n"),
    ("%%record_function --quiet (capture only)", "%%record_function bench --quiet\n"),
    ("%%record_function --no-trace-calls", "%%record_function bench --no-trace-calls\n"),
    ("%%record_function --trace-calls (every call)", "%%record_function bench --trace-calls\n"),
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
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import recfn
    from recfn.notebook_ext.capture import estimated_overhead_ns

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "recfn")
    ip.run_line_magic("load_ext", "pyinstrument")
    run(ip, SETUP.format(rows=args.rows))
    cell = CELL
    run(ip, cell)  # warm caches and imports
    run(ip, "%%record_function warm --quiet\n" + cell)  # recfn calibrates once per process
    recfn.session().reset()
    best = {label: float("inf") for label, _ in MODES}
    details: dict[str, Any] = {}
    default_trace = None
    for _ in range(args.repeat):
        for label, magic in MODES:
            seconds = run(ip, magic + cell)
            trace = recfn.session().last
            if magic.startswith("%%record_function") and trace is not None:
                if seconds < best[label]:  # the stated overhead of the run kept
                    details[label] = (trace.events, estimated_overhead_ns(trace))
                    if label.startswith("%%record_function (default"):
                        default_trace = trace
                recfn.session().reset()
            best[label] = min(best[label], seconds)
    plain = best["plain cell"]
    print(f"{args.rows:,} rows, best of {args.repeat}, in one process")
    print()
    print("| mode | cell ms | x plain | events kept | header: overhead ms | measured ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, _ in MODES:
        events, estimate = details.get(label, (None, None))
        measured = f"{(best[label] - plain) * 1e3:.0f}" if label != "plain cell" else ""
        print(
            f"| {label} | {best[label] * 1e3:.0f} | {best[label] / plain:.2f} "
            f"| {'' if events is None else f'{events:,}'} "
            f"| {'' if estimate is None else f'{estimate / 1e6:.0f}'} | {measured} |"
        )
    print()
    if default_trace is not None:
        print(default_trace.header())
        frame = default_trace.to_pandas()
        calls = frame[frame["scope"] == "function"]
        top = calls.groupby("name", observed=True).agg(
            calls=("id", "size"), hidden_calls=("hidden_calls", "sum")
        )
        print(top.sort_values("calls", ascending=False).head(6).to_string())
    print(f"recfn core compiled with mypyc: {recfn.COMPILED}")


if __name__ == "__main__":
    main()
