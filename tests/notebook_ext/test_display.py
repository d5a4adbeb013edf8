"""What the magic publishes and how it looks: each output published once (the widget's view never
replaced), the stand-in an output of its own, the picture's alt text where exporters read it,
``--var`` holding the Trace, summaries with units, no progress bars."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any, Optional

import pandas as pd
import pyarrow as pa
import pytest
from IPython.utils.capture import capture_output

import recfn
from recfn.analysis.synthetic import make_synthetic_trace
from recfn.formats.trace import Trace
from recfn.notebook_ext import frames
from recfn.notebook_ext.display import show
from recfn.notebook_ext.export import no_progress_bars

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
CELL = "def leaf(n):\n    return sum(range(n))\n\nfor _ in range(3):\n    leaf(1000)\n"


def test_var_holds_the_trace(shell: Any) -> None:
    run = shell.run(f"%%record_function kept --var kept --no-timeline\n{CELL}")
    assert run.error is None
    kept = shell.ns["kept"]
    assert isinstance(kept, recfn.Trace) and kept.name == "kept"
    events = kept.to_pandas()
    assert "kept" in set(events["name"].astype(str)) and hasattr(events, "recfn")


def test_the_picture_carries_its_alt_text_for_exporters(shell: Any) -> None:
    with capture_output() as captured:
        shell.ip.run_cell(f"%%record_function\n{CELL}")
    [picture] = [o for o in captured.outputs if "image/png" in o.data]
    alt = picture.data["text/plain"]
    assert alt.startswith("Timeline of ")
    assert picture.metadata == {"image/png": {"alt": alt}}
    image = picture.data["text/html"]
    assert image.startswith(f'<img class="recfn-timeline-png" alt="{alt}"')


def published(trace: Trace) -> list[Any]:
    """What ``show`` publishes for ``trace`` where a widget can run (a kernel, anywidget);
    nothing goes to stderr. IPython's capture sees ``display()`` only while an InteractiveShell
    exists: callers take the ``shell`` fixture."""
    pytest.importorskip("anywidget")
    kernel = SimpleNamespace(kernel=object(), display_formatter=None)
    with capture_output() as captured:
        show(trace, shell=kernel)
    assert captured.stderr == ""
    return list(captured.outputs)


def test_each_output_is_published_once_and_only_the_header_is_filled_in(shell: Any) -> None:
    frame = make_synthetic_trace(2_000, 2, seed=5)
    outputs = published(Trace(pa.Table.from_pandas(frame, preserve_index=False), name="t"))
    updates = [o for o in outputs if o.update]
    assert len(updates) == 1 and "<table" in updates[0].data["text/html"]  # the summary
    views = [o for o in outputs if WIDGET_VIEW in o.data]
    assert len(views) == 1 and not views[0].update  # the widget: once, never replaced
    stand_ins = [o for o in outputs if "recfn-fallback" in o.data.get("text/html", "")]
    assert len(stand_ins) == 1 and WIDGET_VIEW not in stand_ins[0].data
    kinds = ["view" if WIDGET_VIEW in o.data else "png" if "image/png" in o.data else "html"
             for o in outputs if not o.update]  # fmt: skip
    assert kinds == ["html", "view", "html", "png"]  # header, widget, stand-in, picture


def test_a_trace_of_several_processes_shows_its_widget_and_stand_in(shell: Any) -> None:
    """A dataset's processes number their ids alike: the widget and the stand-in look parents
    up per process, as the picture does (they had refused the repeated ids)."""
    first, second = (make_synthetic_trace(500, 2, seed=s) for s in (1, 2))
    first["pid"], second["pid"] = 1, 2
    both = pd.concat([first, second], ignore_index=True)
    outputs = published(Trace(pa.Table.from_pandas(both, preserve_index=False), name="fleet"))
    assert [o for o in outputs if WIDGET_VIEW in o.data]
    [stand_in] = [o for o in outputs if "recfn-fallback" in o.data.get("text/html", "")]
    assert "Call tree of fleet" in stand_in.data["text/html"]


def test_a_stand_in_whose_file_failed_says_so_and_the_rest_is_published(
    monkeypatch: pytest.MonkeyPatch, shell: Any
) -> None:
    """The stand-in's Chrome file is built in a thread beside the picture: its failure is
    reported as the stand-in's, never raised from the cell and never lost."""
    from recfn.notebook_ext import display

    def broken(trace: Trace, compresslevel: Optional[int] = None) -> bytes:
        raise RuntimeError("no room on the disk")

    monkeypatch.setattr(display, "chrome_gz", broken)
    frame = make_synthetic_trace(300, 1, seed=4)
    trace = Trace(pa.Table.from_pandas(frame, preserve_index=False), name="t")
    pytest.importorskip("anywidget")
    kernel = SimpleNamespace(kernel=object(), display_formatter=None)
    with capture_output() as captured:
        show(trace, shell=kernel)
    assert "recfn: no HTML view: RuntimeError: no room on the disk" in captured.stderr
    outputs = [o for o in captured.outputs if not o.update]
    assert not [o for o in outputs if "recfn-fallback" in o.data.get("text/html", "")]
    assert [o for o in outputs if "image/png" in o.data] and len(outputs) == 3, captured.stderr


def test_summaries_show_with_units_other_frames_as_pandas_does(shell: Any) -> None:
    summary = make_synthetic_trace(500, 1, seed=2).recfn.summary()
    assert frames.is_summary(summary)
    data, _ = shell.ip.display_formatter.format(summary)
    first = summary.index[0]
    total = summary.loc[first, "total_ns"]
    from recfn.analysis.units import format_ns

    assert format_ns(total) in data["text/html"] and "integer" in data["text/html"]
    assert format_ns(total) in data["text/plain"]
    assert summary["total_ns"].dtype.kind == "i"  # the data is untouched
    plain = pd.DataFrame({"x": [1.5e9]})
    data, _ = shell.ip.display_formatter.format(plain)
    assert data["text/html"] == plain._repr_html_() and data["text/plain"] == repr(plain)


def test_a_name_never_timed_on_a_gpu_shows_no_gpu_time() -> None:
    """In the shown summary a name without GPU ranges reads "-" in the GPU columns, not 0 ns."""
    from known_frames import GPU_SPANS, KNOWN_ROWS, make_frame, with_gpu

    from recfn.notebook_ext.display import summary_for_display

    gpu = with_gpu(make_frame(KNOWN_ROWS), GPU_SPANS)
    partly = gpu.assign(device_duration_ns=gpu["device_duration_ns"].where(gpu["name"] != "fwd"))
    shown = summary_for_display(partly.recfn.summary()).set_index("name")
    assert shown.loc["fwd", ["device_total", "device_self", "device_count"]].tolist() == ["-"] * 3
    assert shown.loc["mm", "device_count"] == "3" and shown.loc["mm", "device_total"] != "-"


def test_the_magics_table_says_what_total_percent_and_memory_mean(shell: Any) -> None:
    cell = "import numpy as np\nfor _ in range(3):\n    np.ones((200, 200)) @ np.ones((200, 200))\n"
    run = shell.run(f"%%record_function mem --memory --no-timeline\n{cell}")
    assert run.error is None
    html = run.mime("text/html")[0]
    assert "total %: a share of the trace&#x27;s wall time" in html
    for label in ("<th>allocated</th>", "<th>freed</th>", "<th>net memory</th>"):
        assert label in html
    assert "net = allocated − freed" in html


def test_no_progress_bars_while_publishing(monkeypatch: pytest.MonkeyPatch) -> None:
    from recfn.formats import progress as _progress

    monkeypatch.setattr(_progress, "_in_notebook", lambda: True)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("RECFN_PROGRESS", raising=False)
    assert _progress.interactive()  # a kernel: a bar would show in the cell's output
    with no_progress_bars():
        assert not _progress.interactive()
    assert _progress.interactive()


def test_the_picture_keeps_its_width_however_long_the_header() -> None:
    from PIL import Image

    from recfn.notebook_ext.display import TIMELINE_DPI, TIMELINE_WIDTH_IN, render_timeline_png

    frame = make_synthetic_trace(500, 2, seed=3)
    trace = Trace(pa.Table.from_pandas(frame, preserve_index=False), name="n" * 300)
    png, _ = render_timeline_png(trace)
    assert Image.open(io.BytesIO(png)).size[0] == round(TIMELINE_WIDTH_IN * TIMELINE_DPI)


@pytest.mark.parametrize("kind", ["memory and marks", "gpu", "overlapping", "two hosts"])
def test_the_picture_drawn_from_the_table_is_the_whole_frames(kind: str) -> None:
    """The notebook's picture reads the trace's table (`TableColumns`, no pandas frame); drawn
    from the whole frame it is the same, byte for byte."""
    from known_frames import (
        GPU_SPANS,
        KNOWN_ROWS,
        OVERLAPPING_ROWS,
        make_frame,
        on_two_hosts,
        with_gpu,
    )

    from recfn.analysis.plots.picture import timeline_png
    from recfn.notebook_ext.display import (
        TIMELINE_DPI,
        TIMELINE_WIDTH_IN,
        picture_height_in,
        picture_title,
        render_timeline_png,
    )

    if kind == "gpu":
        frame = with_gpu(make_frame(KNOWN_ROWS), GPU_SPANS)
    elif kind == "overlapping":  # tasks: the parents come from parent_id, not from nesting
        frame = make_frame(OVERLAPPING_ROWS)
    else:
        frame = make_synthetic_trace(2_000, 3, seed=11, n_marks=30, n_memory_events=60)
        if kind == "two hosts":
            frame = on_two_hosts(frame)
    trace = Trace(pa.Table.from_pandas(frame, preserve_index=False), name=kind)
    whole = Trace(trace.table, name=kind)
    expected = timeline_png(
        whole.to_pandas(),
        round(TIMELINE_WIDTH_IN * TIMELINE_DPI),
        round(picture_height_in(whole.threads) * TIMELINE_DPI),
        title=picture_title(whole),
    )
    assert render_timeline_png(trace) == expected
