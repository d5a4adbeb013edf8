"""The summary's text table renders as pandas renders the same frame of strings."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from recfn.notebook_ext.text_table import TextTable

CELL = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12
) | st.sampled_from(
    ["", " padded ", "a&b", "<b>", '"q"', "tab\there", "line\nbreak", "x" * 70, "12.5ms", "—"]
)


TITLE = st.from_regex(r"[a-z_]{1,6}( [a-z%]{1,3})?", fullmatch=True)


@st.composite
def tables(draw: st.DrawFn) -> TextTable:
    width = draw(st.integers(1, 5))
    rows = draw(st.integers(1, 6))
    # Titles as a summary's are: column names and "total %" (pandas lays out headers of spaces
    # alone in its own way).
    titles = draw(st.lists(TITLE, min_size=width, max_size=width, unique=True))
    columns = [draw(st.lists(CELL, min_size=rows, max_size=rows)) for _ in titles]
    return TextTable(titles, columns)


def _frame(table: TextTable) -> pd.DataFrame:
    return pd.DataFrame(dict(zip(table.titles, table.columns)), dtype=object)


@settings(max_examples=200, deadline=None)
@given(tables())
def test_html_is_pandas_to_html(table: TextTable) -> None:
    expected = _frame(table).to_html(index=False, border=0, classes="recfn-summary", escape=True)
    assert table.html("recfn-summary") == expected


@settings(max_examples=200, deadline=None)
@given(tables())
def test_text_is_pandas_to_string(table: TextTable) -> None:
    assert table.text() == _frame(table).to_string(index=False)


def test_an_empty_table_reads_as_pandas_says_it() -> None:
    table = TextTable(["name", "count"], [[], []])
    assert table.text() == _frame(table).to_string(index=False)
    assert table.html("recfn-summary") == _frame(table).to_html(
        index=False, border=0, classes="recfn-summary", escape=True
    )
