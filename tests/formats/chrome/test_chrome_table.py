"""Chrome import straight to Arrow: ``recfn.load``'s table is ``read_chrome_trace``'s frame
without the DataFrame, and the pieces that keep its memory low lose nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import recfn
from recfn.errors import TraceFormatError
from recfn.formats import chrome
from recfn.formats.chrome._reader import _gather_columns, _Ids, _objects, dictionaries_by_row
from recfn.formats.schema import conform

DATA = Path(__file__).resolve().parents[2] / "data"


def test_load_keeps_the_table_read_chrome_trace_gives_as_a_frame() -> None:
    path = DATA / "torch_trace.json"
    trace = recfn.load(path)
    assert trace._df is None  # no DataFrame was built on the way
    frame = chrome.read_chrome_trace(path)
    from_frame = conform(frame, path.name)
    assert trace.table.schema.remove_metadata() == from_frame.schema.remove_metadata()
    assert trace.table.replace_schema_metadata(None).equals(
        from_frame.replace_schema_metadata(None)
    )
    # Same values; the categories are those the rows use, in order of use, as a Parquet has.
    pd.testing.assert_frame_equal(
        trace.to_pandas(), frame, check_categorical=False, check_dtype=False
    )


def test_the_table_reader_refuses_what_the_frame_reader_refuses(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(b'[{"ph": "X", "ts": 1, "dur": -2, "name": "a", "pid": 1, "tid": 1}]')
    for read in (chrome.read_chrome_table, chrome.read_chrome_trace, recfn.load):
        try:
            read(path)
        except TraceFormatError as error:
            assert "bad.json" in str(error) and "negative dur" in str(error)
        else:
            raise AssertionError(f"{read.__name__} read a negative dur")


@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=6),
    st.randoms(use_true_random=False),
    st.floats(0, 1),
    st.sampled_from(["shuffled", "in order", "all in order"]),
    st.sampled_from([1, 3, 10**6]),
)
def test_gathering_parts_takes_the_rows_in_order(
    sizes: list[int], rng: object, keep: float, order: str, batch: int
) -> None:
    """Rows in order come as slices of the parts (runs of `batch` consecutive rows), others
    are taken; the same values either way."""
    import recfn.formats.chrome._reader as imported

    values = [f"v{i}" for i in range(sum(sizes))]
    if not values:
        return
    bounds = np.cumsum([0, *sizes])
    parts = [pa.array(values[lo:hi], pa.large_string()) for lo, hi in zip(bounds, bounds[1:])]
    rows = [i for i in range(len(values)) if order == "all in order" or rng.random() < keep]  # type: ignore[attr-defined]
    if order == "shuffled":
        rng.shuffle(rows)  # type: ignore[attr-defined]
    saved, imported.BATCH = imported.BATCH, batch
    try:
        (taken,) = _gather_columns([parts], np.array(rows, dtype=np.int64))
    finally:
        imported.BATCH = saved
    assert taken.type == pa.string()
    assert taken.to_pylist() == [values[i] for i in rows]
    assert parts == []  # every part was released


def test_gathering_releases_each_part_after_its_last_row(monkeypatch: pytest.MonkeyPatch) -> None:
    import recfn.formats.chrome._reader as imported

    monkeypatch.setattr(imported, "BATCH", 2)
    parts = [pa.array(["a", "b"]), pa.array(["c", "d"]), pa.array(["e"])]
    seen: list[list[bool]] = []

    class Watched(list):  # type: ignore[type-arg]
        def __setitem__(self, index: object, value: object) -> None:
            super().__setitem__(index, value)  # type: ignore[index]
            seen.append([part is None for part in self])

    watched = Watched(parts)
    (taken,) = imported._gather_columns([watched], np.array([0, 1, 2, 3, 4]))
    assert taken.to_pylist() == ["a", "b", "c", "d", "e"]
    # The first part goes after the first block of rows, before the others are taken.
    assert seen[0] == [True, False, False]


def test_dictionaries_by_row_keep_the_values_used_in_order_of_use() -> None:
    values = pa.DictionaryArray.from_arrays(
        pa.array([2, None, 0, 2], pa.int32()), pa.array(["a", "unused", "c"])
    )
    table = dictionaries_by_row(pa.table({"name": values, "n": [1, 2, 3, 4]}))
    column = table.column("name").combine_chunks()
    assert column.dictionary.to_pylist() == ["c", "a"]
    assert column.to_pylist() == ["c", None, "a", "c"]
    assert table.column("n").to_pylist() == [1, 2, 3, 4]


ID_VALUES = st.integers(-3, 3) | st.sampled_from(["Spans", "1", "", 1.0, 2.5, True, False])


@given(
    st.lists(
        st.lists(st.integers(-3, 3), max_size=5).map(lambda v: np.array(v, dtype=np.int64))
        | st.lists(ID_VALUES, min_size=1, max_size=5).map(_objects),
        min_size=1,
        max_size=5,
    ),
    st.randoms(use_true_random=False),
)
def test_mixed_ids_index_and_number_as_an_object_array_would(
    parts: list[np.ndarray], rng: object
) -> None:
    """Parts of integer and other pids (`_Ids`): the values an object array of them gives,
    and codes equal where its factorized codes are."""
    objects = np.concatenate([part.astype(object) for part in parts])
    ids = _Ids(parts)
    index = np.array(
        [rng.randrange(len(objects)) for _ in range(8)] if len(objects) else [], np.int64
    )  # type: ignore[attr-defined]
    picked = ids[index]
    assert picked.dtype == object
    assert [(type(v), v) for v in picked] == [(type(v), v) for v in objects[index]]
    for i in index.tolist():
        assert (type(ids[i]), ids[i]) == (type(objects[i]), objects[i])
    expected = pd.factorize(objects, use_na_sentinel=False)[0]
    assert (pd.factorize(ids.codes)[0] == expected).all()
