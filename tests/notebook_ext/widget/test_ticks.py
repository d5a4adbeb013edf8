"""The widget's time axis and time labels (``timeline.js``: ``axisTicks``, ``formatNs``,
``formatWindow``), run by node on the file the browser loads. Skipped without node."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import recfn.notebook_ext.widget as widget_package

NODE = shutil.which("node")
if NODE is None:
    pytest.skip("node is not installed", allow_module_level=True)

SCRIPT = Path(widget_package.__file__).parent / "timeline.js"
CHAR_PX = 6.5  # axisTicks' default label width per character


def run_js(tmp_path: Path, body: str) -> object:
    """Import the view's module in node (as an ES module) and print ``body``'s JSON."""
    module = tmp_path / "timeline.mjs"
    module.write_text(SCRIPT.read_text(encoding="utf-8"), encoding="utf-8")
    probe = tmp_path / "probe.mjs"
    probe.write_text(
        f"import * as view from {json.dumps(module.as_uri())};\n"
        f"console.log(JSON.stringify({body}));\n",
        encoding="utf-8",
    )
    done = subprocess.run([NODE, str(probe)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


WINDOWS = [
    (t0, t0 + span, width)
    for t0 in (0.0, 1_234.0, 200_800_000.0, 8.6e9, 3.6e12)
    for span in (50.0, 777.0, 1e4, 3.3e6, 2.5e8, 8.6e9)
    for width in (300, 1100)
]


def test_ticks_are_distinct_in_one_unit_and_fit(tmp_path: Path) -> None:
    cases = json.dumps(WINDOWS)
    results = run_js(tmp_path, f"{cases}.map(([a, b, w]) => view.axisTicks(a, b, w))")
    assert isinstance(results, list)
    for (t0, t1, width), ticks in zip(WINDOWS, results):
        labels = [tick["label"] for tick in ticks]
        where = f"window {t0}..{t1} at {width}px: {labels}"
        assert len(labels) >= 2, where
        assert len(set(labels)) == len(labels), where
        assert len({label.split(" ")[1] for label in labels}) == 1, where
        assert not any(re.search(r"\.\d*0 ", label) for label in labels), where
        assert all(t0 <= tick["t"] <= t1 for tick in ticks), where
        step = ticks[1]["t"] - ticks[0]["t"]
        widest = max(len(label) for label in labels) * CHAR_PX
        assert step / (t1 - t0) * width >= widest, where


def test_the_origin_reads_zero_in_the_axis_unit(tmp_path: Path) -> None:
    labels = run_js(
        tmp_path,
        "[view.axisTicks(0, 8.6e9, 1000), view.axisTicks(0, 2.5e6, 1000)]"
        ".map((ticks) => ticks.map((t) => t.label))",
    )
    assert labels[0][0] == "0 s" and "1 s" in labels[0] and "1.000 s" not in labels[0]
    assert labels[1][0] == "0 ms"


def test_durations_and_windows_read_without_needless_zeros(tmp_path: Path) -> None:
    got = run_js(
        tmp_path,
        "[view.formatNs(1e9), view.formatNs(12.5e6), view.formatNs(999), view.formatNs(1234567),"
        " view.formatWindow(0, 1.355e9), view.formatWindow(200.8012e6, 200.8031e6)]",
    )
    assert got == [
        "1 s",
        "12.5 ms",
        "999 ns",
        "1.235 ms",
        "0 s – 1.355 s",
        "200.8012 ms – 200.8031 ms",
    ]
