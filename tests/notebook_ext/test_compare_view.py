"""The comparison in a notebook: the table with change bars, the differential flame view, and
the magic's --compare, within the output budget. Synthetic runs with planted effects."""

from __future__ import annotations

import pytest

import recfn
from recfn.analysis import make_synthetic_trace
from recfn.analysis.synthetic import make_synthetic_run
from recfn.notebook_ext.compare_view import comparison_html, flame_svg
from recfn.notebook_ext.display import bundle_size


def runs(count: int, first: int, **options: object) -> list:
    return [make_synthetic_run(first + i, **options) for i in range(count)]  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def comparison():
    return recfn.compare(runs(4, 0), runs(4, 10, slowdown={"layer": 1.3}), paths=True)


def test_the_html_has_a_bar_per_row_and_a_flame_view(comparison) -> None:
    html = comparison_html(comparison)
    assert html.count("<tr>") == 1 + len(comparison.table)
    assert 'aria-label="+' in html  # a change bar's interval
    assert "differential flame view" in html
    assert "step &gt; forward &gt; layer" in html  # a frame's tooltip


def test_the_repr_is_the_view(comparison) -> None:
    assert comparison._repr_html_().startswith("<style>")


def test_a_large_flame_view_stays_within_its_budget() -> None:
    frames = [make_synthetic_trace(20_000, 4, seed=i, max_depth=12) for i in range(2)]
    paths = recfn.compare(frames[:1], frames[1:], paths=True).paths
    svg = flame_svg(paths, 50_000)
    assert len(svg.encode()) <= 50_000
    assert "narrow frames left out" in svg


def test_the_whole_view_stays_within_the_budget(comparison) -> None:
    assert len(comparison_html(comparison, budget=20_000).encode()) <= 20_000


def test_the_magic_compares_the_cell_with_a_variable_within_the_budget(shell) -> None:
    shell.ns["baseline"] = runs(3, 0)
    source = "import recfn\nfor _ in range(3):\n    with recfn.record_function('load'):\n        sum(range(1000))"
    run = shell.run(f"%%record_function --compare baseline --max-output-bytes 400000\n{source}")
    assert run.error is None
    html = run.mime("text/html")
    assert any("recfn-compare" in part for part in html)
    size = sum(bundle_size(data) for data in run.outputs)
    assert size <= 400_000


def test_a_bad_baseline_leaves_the_cell_shown_and_says_why(shell) -> None:
    run = shell.run("%%record_function --compare no/such/runs\nx = 1")
    assert run.error is None
    assert any("recfn-summary" in part for part in run.mime("text/html"))
    assert "no comparison with 'no/such/runs'" in run.stderr
