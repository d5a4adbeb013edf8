"""The widget's kernel side: initial state within budget, requests answered, the display hook."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pyarrow as pa
import pytest

pytest.importorskip("anywidget")

from recfn.analysis.synthetic import make_synthetic_trace
from recfn.notebook_ext.widget import can_show, timeline_widget
from recfn.notebook_ext.widget import view as view_module
from recfn.notebook_ext.widget.lod import response_json
from recfn.notebook_ext.widget.view import TimelineWidget


@pytest.fixture(scope="module")
def table() -> pa.Table:
    frame = make_synthetic_trace(30_000, 3, seed=3, n_memory_events=200)
    return pa.Table.from_pandas(frame, preserve_index=False)


def test_initial_state_is_the_first_view_within_budget(table: pa.Table) -> None:
    widget = TimelineWidget(table)
    assert widget.view["t0"] == 0 and widget.view["t1"] == widget.info["span_ns"]
    assert [lane["kind"] for lane in widget.info["lanes"]] == ["ranges"] * 3 + ["memory"]
    state = widget.get_state()  # what the kernel sends: JSON text, which the view parses
    assert json.loads(state["view_json"]) == widget.view and "tree" not in state
    stored = sum(len(json.dumps(state[k])) for k in ("info_json", "view_json", "summary_json"))
    assert widget.initial_state_size() == stored <= view_module.INITIAL_STATE_BUDGET


def test_budget_is_enforced_by_narrowing_the_first_view(
    table: pa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    wide = TimelineWidget(table).initial_state_size()
    monkeypatch.setattr(view_module, "INITIAL_STATE_BUDGET", wide // 3)
    narrow = TimelineWidget(table)
    assert narrow.initial_state_size() <= wide // 3
    assert narrow.view["width_px"] < view_module.INITIAL_WIDTH_PX


def test_requests_get_replies_with_their_id(table: pa.Table) -> None:
    widget = TimelineWidget(table)
    span = widget.info["span_ns"]
    reply = widget.handle({"type": "query", "id": 4, "t0": 0, "t1": span / 100, "width": 500})
    assert reply["id"] == 4 and reply["result"]["ranges"]["row"]
    row = reply["result"]["ranges"]["row"][0]
    assert widget.handle({"type": "detail", "id": 5, "row": row})["result"]["row"] == row
    found = widget.handle({"type": "search", "id": 6, "text": "softmax"})["result"]
    assert [widget.index.names[i] for i in found["ids"]] == ["aten::softmax"]
    tree = widget.handle({"type": "tree", "id": 7})["result"]
    roots = [count for count, parent in zip(tree["count"], tree["parent"]) if parent < 0]
    assert sum(roots) == table.column("parent_id").null_count


def test_the_summary_pane_is_in_the_initial_state_and_answers_windows(table: pa.Table) -> None:
    widget = TimelineWidget(table)
    whole = widget.summary
    assert whole["t0"] is None and whole["sort"] == "total" and whole["rows"]["name"]
    assert response_json(widget.handle({"type": "summary", "id": 1})["result"]) == (
        widget.summary_json
    )
    span = widget.info["span_ns"]
    reply = widget.handle({"type": "summary", "id": 2, "t0": 0, "t1": span / 10, "sort": "calls"})[
        "result"
    ]
    assert reply["t0"] == 0 and reply["t1"] == span / 10 and reply["sort"] == "calls"
    calls = reply["rows"]["calls"]
    assert calls == sorted(calls, reverse=True) and sum(calls) < sum(whole["rows"]["calls"])
    [softmax] = widget.index.name_ids("aten::softmax")
    longest = widget.handle({"type": "longest", "id": 3, "name": softmax})["result"]
    assert widget.index.names[widget.index.name_codes[longest["row"]]] == "aten::softmax"


def traced_here() -> int:
    return sum(range(100))


def test_a_tooltip_detail_says_where_the_function_is() -> None:
    import recfn

    with recfn.profile(trace_calls=True) as prof:
        traced_here()
    widget = TimelineWidget(prof.table)
    names = list(prof.to_pandas()["name"].astype(str))
    row = next(i for i, name in enumerate(names) if name.endswith("::traced_here"))
    detail = widget.handle({"type": "detail", "id": 1, "row": row})["result"]
    line = traced_here.__code__.co_firstlineno
    assert detail["location"].endswith(f"test_view.py:{line}")


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ({"type": "query", "t0": 5, "t1": 1, "width": 100}, "QueryError"),
        ({"type": "query", "t0": 0}, "KeyError"),
        ({"type": "query", "t0": 0, "t1": 9, "width": 9, "highlight": 3}, "highlight must be"),
        ({"type": "summary", "sort": "fastest"}, "sort must be one of"),
        ({"type": "summary", "t0": 3, "t1": 3}, "finite t0 < t1"),
        ({"type": "longest", "name": -1}, "name must be an id"),
        ({"type": "launch"}, "unknown request type 'launch'"),
    ],
)
def test_bad_requests_get_an_error_reply(
    table: pa.Table, message: dict[str, object], error: str
) -> None:
    reply = TimelineWidget(table).handle({**message, "id": 9})
    assert reply["id"] == 9 and error in reply["error"] and "result" not in reply


def test_timeline_widget_takes_a_table_or_a_trace(table: pa.Table) -> None:
    assert timeline_widget(SimpleNamespace(table=table)).info["ranges"] == 30_000
    with pytest.raises(TypeError, match="pyarrow.Table of events or a Trace"):
        timeline_widget([1, 2])


def test_widget_only_where_a_kernel_runs() -> None:
    assert not can_show(SimpleNamespace())
    assert can_show(SimpleNamespace(kernel=object()))


def test_export_is_the_trace_as_chrome_json_that_loads_back(tmp_path) -> None:
    import recfn
    from recfn.formats.trace import Trace

    frame = make_synthetic_trace(300, 2, seed=3)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    file_name, data = timeline_widget(Trace(table, name="cell[7]")).export()
    assert file_name == "cell_7.json.gz" and data[:2] == b"\x1f\x8b"
    (tmp_path / file_name).write_bytes(data)
    loaded = recfn.load(tmp_path / file_name, as_pandas=True)
    ranges = lambda df: sorted(map(str, df.loc[df["kind"] == "range", "name"]))  # noqa: E731
    assert ranges(loaded) == ranges(frame)
