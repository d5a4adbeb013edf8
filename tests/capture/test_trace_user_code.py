"""Following user code (trace_user_code, the magic's and recfn run's default): every call of user
code and every library call it makes is a row, at any depth; the library's own calls are counted
(hidden_calls, recfn.call_tracing), never rows. Both tracers record the same rows.

The library is a stand-in installed into a temporary site-packages folder, so its call counts
are known exactly; pandas checks the same on a real row-wise DataFrame.apply.
"""

from __future__ import annotations

import json
import site
import sys
import textwrap
from collections.abc import Iterator
from types import ModuleType

import pytest

import recfn
from recfn.capture import _tracer

# exact counts of traced calls: no other library's gc callback runs (and gets recorded) inside
pytestmark = pytest.mark.usefixtures("quiet_gc")

STANDIN = textwrap.dedent(
    """
    def apply(rows, fn):
        return _dispatch(rows, fn, 12)

    def _dispatch(rows, fn, layers):  # library frames between the entry point and the callback
        if layers:
            return _dispatch(rows, fn, layers - 1)
        out = []  # a loop, not a comprehension (a call of its own before Python 3.12)
        for row in rows:
            out.append(_call(fn, row))
        return out

    def _call(fn, row):
        return fn(row)

    class Row:
        def __init__(self, values):
            self._values = values

        def __getattr__(self, name):
            return _lookup(self._values, name)

    def _lookup(values, name):
        return _resolve(values, name)

    def _resolve(values, name):
        return values[name]
    """
)
ROWS = 50
DEPTH = 30  # user frames above the entry point: the callback is far below any fixed depth


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """``standin_lib``, installed into a site-packages folder of its own."""
    folder = tmp_path_factory.mktemp("env") / "lib" / "site-packages"
    (folder / "standin_lib").mkdir(parents=True)
    (folder / "standin_lib" / "__init__.py").write_text(STANDIN)
    saved = sys.path[:]
    site.addsitedir(str(folder))
    import standin_lib

    yield standin_lib
    sys.path[:] = saved
    sys.modules.pop("standin_lib", None)


@pytest.fixture(params=["native", "python"])
def tracer_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "native" and not _tracer.native_available():
        pytest.skip("recfn.native._ctrace is not built (pure install)")
    monkeypatch.setenv("RECFN_CTRACE", "1" if request.param == "native" else "0")
    return str(request.param)


def user_callback(row: object) -> object:
    return row.a + row.b  # type: ignore[attr-defined]


def user_down(lib: ModuleType, rows: list[object], depth: int) -> object:
    if depth:
        return user_down(lib, rows, depth - 1)
    return lib.apply(rows, user_callback)


def counts(prof: recfn.profile) -> dict[str, tuple[int, int]]:
    """Traced rows by name: (calls, hidden library calls below them)."""
    out: dict[str, tuple[int, int]] = {}
    for row in prof.table.to_pylist():
        if row["scope"] == "function":
            calls, hidden = out.get(row["name"], (0, 0))
            out[row["name"]] = (calls + 1, hidden + (row["hidden_calls"] or 0))
    return out


def test_a_callback_under_a_library_call_is_named_with_its_library_callee(standin, tracer_kind):
    rows = [standin.Row({"a": i, "b": 1}) for i in range(ROWS)]
    with recfn.profile(trace_calls=True, trace_user_code=True) as prof:
        result = user_down(standin, rows, DEPTH)
    assert result == [i + 1 for i in range(ROWS)]
    here = __name__
    assert counts(prof) == {
        f"{here}::user_down": (DEPTH + 1, 0),
        "standin_lib::apply": (1, 13 + ROWS),  # _dispatch x13, _call per row: hidden below it
        f"{here}::user_callback": (ROWS, 0),
        "standin_lib::Row.__getattr__": (2 * ROWS, 2 * 2 * ROWS),  # _lookup, _resolve each
    }
    table = prof.table.to_pylist()
    by_id = {row["id"]: row for row in table}
    for row in table:
        parent = by_id.get(row["parent_id"])
        if row["name"].endswith("::user_callback"):  # the library frames between are not rows
            assert parent is not None and parent["name"] == "standin_lib::apply"
            assert row["depth"] == DEPTH + 2
        elif row["name"] == "standin_lib::Row.__getattr__":
            assert parent is not None and parent["name"].endswith("::user_callback")
    tracing = json.loads(prof.table.schema.metadata[b"recfn.call_tracing"])
    assert tracing["hidden"] == {"standin_lib": 13 + ROWS + 4 * ROWS}
    assert tracing["recorded"] == DEPTH + 1 + 1 + ROWS + 2 * ROWS
    assert tracing["user_code"] is True
    assert tracing["callbacks"]["python"] >= 2 * (tracing["recorded"] + 13 + 5 * ROWS)


def test_include_records_a_library_as_user_code(standin, tracer_kind):
    rows = [standin.Row({"a": 1, "b": 2})]
    with recfn.profile(
        trace_calls=True, trace_user_code=True, trace_include=["standin_lib"]
    ) as prof:
        user_down(standin, rows, 0)
    found = counts(prof)
    assert found["standin_lib::_dispatch"] == (13, 0)
    assert found["standin_lib::_resolve"] == (2, 0)
    assert "hidden_calls" in prof.table.column_names
    assert prof.table["hidden_calls"].null_count == prof.table.num_rows  # nothing hidden


def test_depth_limit_stays_an_option(standin, tracer_kind):
    rows = [standin.Row({"a": 1, "b": 2})]
    with recfn.profile(trace_calls=True, trace_user_code=True, trace_max_depth=3) as prof:
        user_down(standin, rows, DEPTH)
    # below the limit nothing is a row; the library's own calls there are still counted, on
    # the innermost row: _dispatch x13, _call, and _lookup and _resolve for both attributes
    assert counts(prof) == {f"{__name__}::user_down": (3, 13 + 1 + 4)}


def test_both_tracers_record_the_same_rows(standin, monkeypatch):
    if not _tracer.native_available():
        pytest.skip("recfn.native._ctrace is not built (pure install)")
    rows = [standin.Row({"a": i, "b": 1}) for i in range(5)]
    shapes = []
    for flag in ("1", "0"):
        monkeypatch.setenv("RECFN_CTRACE", flag)
        with recfn.profile(trace_calls=True, trace_user_code=True) as prof:
            user_down(standin, rows, 3)
        table = prof.table.to_pylist()
        names = {row["id"]: row["name"] for row in table}
        shapes.append(
            [
                (row["name"], row["depth"], names.get(row["parent_id"]), row["hidden_calls"])
                for row in table
            ]
        )
    assert shapes[0] == shapes[1]


def test_pandas_row_wise_apply_names_the_lambda_and_its_pandas_callee(tracer_kind):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": range(200), "b": range(200)})
    with recfn.profile(trace_calls=True, trace_user_code=True) as prof:
        frame.apply(lambda row: row.a + row["b"], axis=1)
    found = counts(prof)
    lambdas = [name for name in found if name.endswith("<lambda>")]
    assert len(lambdas) == 1 and found[lambdas[0]][0] == 200  # exact: no sampling, no cap
    assert found["pandas.core.generic::NDFrame.__getattr__"][0] == 200
    assert found["pandas.core.series::Series.__getitem__"][0] == 200
    assert found["pandas.core.frame::DataFrame.apply"] == (
        1,
        found["pandas.core.frame::DataFrame.apply"][1],
    )
    assert found["pandas.core.frame::DataFrame.apply"][1] > 0  # pandas' own frames: hidden
    tracing = json.loads(prof.table.schema.metadata[b"recfn.call_tracing"])
    assert tracing["hidden"]["pandas"] > 1000
    assert sum(calls for calls, _ in found.values()) == tracing["recorded"]


def test_options_validated():
    with pytest.raises(ValueError, match="trace_user_code needs trace_calls"):
        recfn.profile(trace_user_code=True)
    with pytest.raises(TypeError, match="trace_user_code must be a bool"):
        recfn.profile(trace_calls=True, trace_user_code=1)  # type: ignore[arg-type]
