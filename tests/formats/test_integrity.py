"""Integrity of Parquet traces: altered values, damaged bytes and impossible events are refused."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from fleetdata import same
from hypothesis import given, settings
from hypothesis import strategies as st

import recfn
from recfn import TraceFormatError
from recfn.formats import _digest, schema
from recfn.formats._digest import table_digest


@pytest.fixture(scope="module")
def table() -> pa.Table:
    with recfn.profile(report_input_shapes=True, with_stack=True) as prof:
        for step in range(40):
            with recfn.record_function("step", args=f"n={step}"):
                with recfn.record_function_fast("aten::mm", [np.ones((2, step % 3 + 1))]):
                    recfn.report_memory_usage(8 * step, "cpu")
                recfn.mark("tick")
    table = prof.table  # made the same in every run, so the fuzzer's cases repeat
    start = 1_700_000_000_000_000_000 + 1000 * np.arange(table.num_rows)
    end = pc.if_else(pc.is_null(table.column("end_ns")), None, pa.array(start + 10))
    table = with_column(with_column(table, "start_ns", start), "end_ns", end)
    table = with_column(table, "pid", np.full(table.num_rows, 7))
    stacks = [
        None if s is None else [f"f.py:{row}(g)"]
        for row, s in enumerate(table["stack"].to_pylist())
    ]
    table = with_column(table, "stack", stacks)
    ids = table.column("id").to_numpy()
    parents = pa.array(np.searchsorted(ids, table.column("parent_id").fill_null(0)) + 1)
    parents = pc.if_else(pc.is_null(table.column("parent_id")), None, parents)
    table = with_column(with_column(table, "id", np.arange(1, len(ids) + 1)), "parent_id", parents)
    config = json.loads(schema.metadata_of(table)[schema.CONFIG_KEY])
    fixed = schema.build_metadata(config=config, start_ns=int(start[0]), wall_ns=1, pid=7, host="h")
    return table.replace_schema_metadata(fixed)


def with_column(table: pa.Table, name: str, values: object) -> pa.Table:
    index = table.schema.get_field_index(name)
    return table.set_column(index, name, pa.array(values, table.schema.field(index).type))


def write_raw(table: pa.Table, path: Path) -> Path:
    """Write ``table`` as it is (its metadata too), bypassing recfn's checks."""
    pq.write_table(table, path, store_schema=True, use_compliant_nested_type=False)
    return path


def test_files_carry_a_hash_that_loading_removes(table: pa.Table, tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    recfn.Trace(table).save(path)
    footer = pq.read_metadata(path).metadata
    assert schema.CONTENT_HASH_KEY.encode() in footer
    loaded = recfn.load(path).table
    assert schema.CONTENT_HASH_KEY not in schema.metadata_of(loaded)
    assert loaded.equals(table) and loaded.schema.equals(table.schema, check_metadata=True)


def test_an_altered_value_is_refused(table: pa.Table, tmp_path: Path) -> None:
    hashed = schema.with_content_hash(table)
    start = table.column("start_ns").to_numpy().copy()
    start[7] += 448  # what a flipped bit did to the tester's row 4867
    path = write_raw(with_column(hashed, "start_ns", start), tmp_path / "altered.parquet")
    with pytest.raises(TraceFormatError, match=r"altered.parquet.*content hash mismatch in column "
                       r"'start_ns': the file was altered after recfn wrote it"):  # fmt: skip
        recfn.load(path)


def test_altered_metadata_or_types_are_refused(table: pa.Table, tmp_path: Path) -> None:
    hashed = schema.with_content_hash(table)
    meta = dict(hashed.schema.metadata)
    meta[schema.DROPPED_EVENTS_KEY.encode()] = b"5"
    path = write_raw(hashed.replace_schema_metadata(meta), tmp_path / "meta.parquet")
    with pytest.raises(TraceFormatError, match="mismatch in its column names, types or metadata"):
        recfn.load(path)
    narrow = hashed.set_column(
        hashed.schema.get_field_index("depth"), "depth", hashed.column("depth").cast(pa.int64())
    )
    with pytest.raises(TraceFormatError, match="mismatch in its column names, types"):
        recfn.load(write_raw(narrow, tmp_path / "types.parquet"))
    meta[schema.CONTENT_HASH_KEY.encode()] = b"{not json"
    with pytest.raises(TraceFormatError, match="recfn.content_hash is unreadable"):
        recfn.load(write_raw(table.replace_schema_metadata(meta), tmp_path / "bad.parquet"))


def test_a_flipped_bit_in_a_page_is_refused(table: pa.Table, tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    recfn.Trace(table).save(path)
    chunk = pq.read_metadata(path).row_group(0).column(table.schema.get_field_index("start_ns"))
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset + chunk.total_compressed_size - 2] ^= 0x10  # in the page's values
    path.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match="t.parquet.*CRC checksum verification failed"):
        recfn.load(path)


def test_a_damaged_hash_key_is_refused(table: pa.Table, tmp_path: Path) -> None:
    """The fuzzer's find: a flipped bit in the key's name made the file look hashless."""
    path = tmp_path / "t.parquet"
    recfn.Trace(table).save(path)
    data = path.read_bytes()
    assert data.count(b"recfn.content_hash") == 1  # the footer's key; the other copy is base64
    path.write_bytes(data.replace(b"recfn.content_hash", b"rEcfn.content_hash"))
    with pytest.raises(TraceFormatError, match="metadata was altered .*two copies of it differ"):
        recfn.load(path)


def test_files_without_a_hash_still_load(table: pa.Table, tmp_path: Path) -> None:
    old = recfn.load(write_raw(table, tmp_path / "old.parquet")).table  # recfn before the hash
    assert old.equals(table) and old.schema.equals(table.schema, check_metadata=True)


def test_merged_and_synthetic_traces_pass_the_checks(table: pa.Table, tmp_path: Path) -> None:
    from recfn.analysis.synthetic import make_synthetic_trace

    merged = recfn.merge([table, table, table]).table
    recfn.Trace(merged).save(tmp_path / "merged.parquet")
    assert recfn.load(tmp_path / "merged.parquet").table.equals(merged)
    synthetic = schema.conform(make_synthetic_trace(500, 3, n_marks=20, n_memory_events=20))
    schema.check_events(synthetic, "synthetic")


def test_wrong_column_types_are_refused(table: pa.Table, tmp_path: Path) -> None:
    narrow = table.set_column(
        table.schema.get_field_index("thread_id"), "thread_id", table["thread_id"].cast(pa.int32())
    )
    with pytest.raises(TraceFormatError, match="column 'thread_id' has type int32, expected int64"):
        recfn.load(write_raw(narrow, tmp_path / "narrow.parquet"))


def broken_tables(table: pa.Table) -> dict[str, tuple[pa.Table, str]]:
    """Tables no capture can produce, and what the refusal must say."""
    ids = table.column("id").to_numpy()
    parents = table.column("parent_id").to_pylist()
    child = next(row for row, parent in enumerate(parents) if parent is not None)
    parent_row = int(np.flatnonzero(ids == parents[child])[0])
    duplicate = ids.copy()
    duplicate[3] = duplicate[2]
    dangling = list(parents)
    dangling[child] = int(ids.max()) + 10
    cycle = list(parents)
    cycle[parent_row] = int(ids[child])  # the parent's parent is its own child
    end = table.column("end_ns").to_pylist()
    end[child] = table.column("start_ns")[child].as_py() - 1
    return {
        "duplicate": (with_column(table, "id", duplicate), rf"id {duplicate[2]} is used by more "
                      r"than one row \(rows \[2, 3\]\)"),
        "dangling": (with_column(table, "parent_id", dangling), rf"row {child}: parent_id "
                     rf"{dangling[child]} is not the id of any row"),
        "cycle": (with_column(table, "parent_id", cycle), "the parents form a cycle"),
        "backwards": (with_column(table, "end_ns", end), rf"row {child}: end_ns .* is before"),
        "null": (with_column(table, "start_ns", [None] * table.num_rows),
                 "row 0: column 'start_ns' is null"),
    }  # fmt: skip


@pytest.mark.parametrize("case", ["duplicate", "dangling", "cycle", "backwards", "null"])
def test_impossible_events_are_refused_on_load_and_save(
    table: pa.Table, tmp_path: Path, case: str
) -> None:
    broken, message = broken_tables(table)[case]
    with pytest.raises(TraceFormatError, match=message):
        recfn.load(write_raw(broken, tmp_path / "raw.parquet"))
    hashed = write_raw(schema.with_content_hash(broken), tmp_path / "hashed.parquet")
    with pytest.raises(TraceFormatError, match=message):
        recfn.load(hashed)  # a valid hash does not make the events possible
    with pytest.raises(TraceFormatError, match=message):
        recfn.Trace(broken).save(tmp_path / "saved.parquet")
    foreign = broken.replace_schema_metadata(None).to_pandas()
    foreign.to_parquet(tmp_path / "foreign.parquet")
    with pytest.raises(TraceFormatError, match=message.replace("row 0: column 'start_ns'", "")):
        recfn.load(tmp_path / "foreign.parquet")


def naive_cycle(parents: list[int]) -> bool:
    """Whether following ``parents`` (-1: root) from some row loops."""
    for row in range(len(parents)):
        seen = set()
        while row >= 0:
            if row in seen:
                return True
            seen.add(row)
            row = parents[row]
    return False


LAYOUTS = {
    "rows shifted": lambda n: np.arange(n) + 5,
    "increasing": lambda n: np.arange(n) * 3 + 5,
    "shuffled, dense": lambda n: np.random.default_rng(n).permutation(n) + 5,
    "shuffled, sparse": lambda n: np.random.default_rng(n).permutation(n) * 10**9 - 7,
}
"""Id layouts: each takes another path of ``schema._rows_of``."""


def events(parents: list[int], depth: list[int], layout: str = "increasing") -> pa.Table:
    n = len(parents)
    ids = LAYOUTS[layout](n)
    base = schema.conform(
        pa.table(
            {
                "id": pa.array(ids),
                "name": ["x"] * n,
                "kind": ["range"] * n,
                "start_ns": np.arange(n),
                "thread_id": np.ones(n, dtype=np.int64),
            }
        )
    )
    parent_ids = [int(ids[p]) if p >= 0 else None for p in parents]
    return with_column(with_column(base, "parent_id", parent_ids), "depth", depth)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(-1, 11), min_size=1, max_size=12),
    st.booleans(),
    st.sampled_from(sorted(LAYOUTS)),
)
def test_cycle_check_agrees_with_following_the_parents(
    parents: list[int], flat: bool, layout: str
) -> None:
    n = len(parents)
    parents = [p if p < n else -1 for p in parents]
    depth = [0] * n
    if not flat and not naive_cycle(parents):
        for row in range(n):  # true depths: the fast path
            at = row
            while parents[at] >= 0:
                depth[row] += 1
                at = parents[at]
    table = events(parents, depth, layout)
    if naive_cycle(parents):
        with pytest.raises(TraceFormatError, match="cycle"):
            schema.check_events(table, "t")
    else:
        schema.check_events(table, "t")


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_id_layout_finds_duplicates_and_dangling_parents(layout: str) -> None:
    table = events([-1, 0, 1, 1, -1], [0, 1, 2, 2, 0], layout)
    schema.check_events(table, "t")
    ids = table.column("id").to_numpy()
    twice = ids.copy()
    twice[4] = ids[0]
    with pytest.raises(TraceFormatError, match=rf"id {ids[0]} is used by more than one row "
                       r"\(rows \[0, 4\]\)"):  # fmt: skip
        schema.check_events(with_column(table, "id", twice), "t")
    for missing in (int(ids.max()) + 1, int(ids.min()) - 1, int(ids.min()) + 1):
        if missing in ids:
            continue
        parents = table.column("parent_id").to_pylist()
        parents[2] = missing
        with pytest.raises(TraceFormatError, match=rf"row 2: parent_id {missing} is not the id"):
            schema.check_events(with_column(table, "parent_id", parents), "t")


def test_deep_chains_pass_and_a_loop_at_their_end_is_found() -> None:
    n = 5000
    chain = [-1, *range(n - 1)]  # row i's parent is row i - 1
    schema.check_events(events(chain, [0] * n), "t")  # flat depths: pointer jumping
    looped = [n - 1, *range(n - 1)]
    with pytest.raises(TraceFormatError, match="cycle"):
        schema.check_events(events(looped, [0] * n), "t")


def test_the_digest_sees_values_not_buffers(table: pa.Table) -> None:
    meta = dict(table.schema.metadata)
    digest = table_digest(table, meta)
    pieces = pa.concat_tables([table.slice(0, 5), table.slice(5, 50), table.slice(55)])
    assert pieces.column("name").num_chunks == 3
    assert table_digest(pieces, meta) == digest
    names = table.column("name").combine_chunks()
    same_names = pa.DictionaryArray.from_arrays(  # reversed dictionary, with an unused entry
        pa.array([len(names.dictionary) - i for i in names.indices.to_pylist()], pa.int32()),
        pa.array(["unused", *reversed(names.dictionary.to_pylist())]),
    )
    assert same_names.to_pylist() == names.to_pylist()
    assert table_digest(with_column(table, "name", same_names), meta) == digest
    changed = table_digest(with_column(table, "depth", [0] * table.num_rows), meta)
    assert {k for k in digest if changed[k] != digest[k]} == {"depth"}


def mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    kind = rng.randrange(3)
    if kind == 0:
        return data[: rng.randrange(len(data))]
    for _ in range(1 if kind == 1 else rng.randint(2, 8)):
        position = rng.randrange(len(out) * 8)
        out[position // 8] ^= 1 << (position % 8)
    return bytes(out)


def test_corruption_fuzzer(table: pa.Table, tmp_path: Path) -> None:
    """Truncations and bit flips: each damaged file loads exactly or raises TraceFormatError."""
    path = tmp_path / "original.parquet"
    recfn.Trace(table).save(path)
    original = recfn.load(path).table
    data = path.read_bytes()
    rng = random.Random(20261122)
    outcomes = {"refused": 0, "exact": 0}
    for case in range(300):
        damaged = tmp_path / f"case{case % 2}.parquet"
        damaged.write_bytes(mutate(data, rng))
        try:
            loaded = recfn.load(damaged).table
        except TraceFormatError as exc:
            assert damaged.name in str(exc)
            outcomes["refused"] += 1
        else:
            assert loaded.equals(original), f"case {case} loaded different values"
            assert loaded.schema.equals(original.schema, check_metadata=True), f"case {case}"
            outcomes["exact"] += 1
    assert outcomes["refused"] > 200  # the mutations do damage files


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=40),
    st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", "c"])), max_size=40),
    st.integers(0, 20),
)
def test_the_digest_of_a_slice_is_the_digest_of_its_copy(
    numbers: list[int | None], names: list[str | None], offset: int
) -> None:
    n = min(len(numbers), len(names))
    table = pa.table(
        {
            "n": pa.array(numbers[:n], pa.int64()),
            "s": pa.array(names[:n], pa.string()),
            "t": pa.array([f"{x}" * (i % 3) for i, x in enumerate(numbers[:n])], pa.string()),
            "d": pa.array(names[:n], pa.string()).dictionary_encode(),
            "l": pa.array([[x] if x is not None else None for x in numbers[:n]]),
        }
    )
    sliced = table.slice(min(offset, n), n // 2)  # bits on both sides of the slice
    copied = pa.Table.from_pylist(sliced.to_pylist(), schema=sliced.schema)
    assert table_digest(sliced, {}) == table_digest(copied, {})


@given(
    st.lists(st.one_of(st.none(), st.text(max_size=4)), max_size=30),
    st.lists(st.integers(0, 30), max_size=4),
    st.integers(0, 3),
)
def test_the_digest_of_chunked_strings_is_the_digest_of_their_concatenation(
    names: list[str | None], cuts: list[int], offset: int
) -> None:
    """Strings hashed a chunk at a time (a Chrome import's args) hash as one chunk."""
    bounds = sorted({0, len(names), *(min(c, len(names)) for c in cuts)})
    chunks = [pa.array(names[lo:hi], pa.string()) for lo, hi in zip(bounds, bounds[1:])]
    chunks = [chunk.slice(min(offset, len(chunk))) for chunk in chunks]  # offsets inside chunks
    chunked = pa.table({"s": pa.chunked_array(chunks, pa.string())})
    combined = pa.table({"s": chunked.column("s").combine_chunks()})
    assert table_digest(chunked, {}) == table_digest(combined, {})


def test_ids_are_checked_per_process(table: pa.Table) -> None:
    """Two processes may use the same ids (a fleet's tables concatenated); within one process an
    id used twice, or a parent from the other process, is refused and the process named."""
    other = with_column(table, "pid", np.full(table.num_rows, 8))
    schema.check_events(pa.concat_tables([table, other]), "fleet")  # passes
    twice = pa.concat_tables([table, other, other.slice(0, 3)])
    with pytest.raises(
        TraceFormatError, match=r"fleet \(host=.*, pid=8; .*id 1 is used by more than one row"
    ):
        schema.check_events(twice, "fleet")
    orphan = with_column(
        other,
        "parent_id",
        pc.if_else(
            pc.is_null(other.column("parent_id")), None, pc.add(other.column("parent_id"), 10_000)
        ),
    )
    with pytest.raises(TraceFormatError, match=r"pid=8.*is not the id of any row"):
        schema.check_events(pa.concat_tables([table, orphan]), "fleet")


def test_a_file_is_hashed_a_row_group_at_a_time(
    table: pa.Table, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each row group is hashed alone (a reader that streams row groups checks them as they
    come): a file of several loads whole, read at once or out of core, and a value altered
    in one of them is refused, naming its column."""
    from recfn.analysis.outofcore.files import summarize_files
    from recfn.formats import _digest

    monkeypatch.setattr(_digest, "ROW_GROUP_ROWS", 50)
    path = tmp_path / "t.parquet"
    recfn.Trace(table).save(path)
    groups = pq.ParquetFile(path).metadata.num_row_groups
    assert groups == -(-table.num_rows // 50) > 2
    loaded = recfn.load(path)
    assert loaded.table.equals(table)
    out_of_core = summarize_files([str(path)])  # without the memory columns
    same(out_of_core, loaded.summary()[out_of_core.columns])
    start = table.column("start_ns").to_pylist()
    start[120] -= 1  # in the third row group
    altered = with_column(pq.read_table(path), "start_ns", start)
    pq.write_table(altered, path, row_group_size=50, use_compliant_nested_type=False)
    for read in (recfn.load, lambda p: summarize_files([str(p)])):
        with pytest.raises(TraceFormatError, match="content hash mismatch in column 'start_ns'"):
            read(path)


@pytest.mark.parametrize(
    ("column", "damage"),
    [
        ("name", lambda values: [*values[:70], "renamed", *values[71:]]),
        ("end_ns", lambda values: [*values[:70], values[70] + 1, *values[71:]]),
        ("kind", lambda values: [*values[:70], "mark", *values[71:]]),
        ("parent_id", lambda values: [*values[:70], None, *values[71:]]),
    ],
)
def test_a_summary_verifies_every_column_it_reads(
    table: pa.Table,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    column: str,
    damage: Any,
) -> None:
    """The out-of-core summary reads and verifies only the columns it needs: a value altered
    in one of them is refused, naming the column, as a full load refuses it (the lazy load's
    summary and ``recfn summary`` with exit 1)."""
    from recfn.analysis.outofcore.files import summarize_files
    from recfn.cli import main

    path = tmp_path / "t.parquet"
    recfn.Trace(table).save(path)
    stored = pq.read_table(path)
    altered = with_column(stored, column, damage(stored.column(column).to_pylist()))
    pq.write_table(altered, path, use_compliant_nested_type=False)
    refused = f"content hash mismatch in column '{column}'"
    for read in (
        recfn.load,
        lambda p: summarize_files([str(p)]),
        lambda p: recfn.load(p, lazy=True).summary(),
    ):
        with pytest.raises(TraceFormatError, match=refused):
            read(path)
    assert main(["summary", str(path)]) == 1
    assert refused in capsys.readouterr().err


def test_a_summary_does_not_read_or_check_the_columns_it_does_not_use(
    table: pa.Table, tmp_path: Path
) -> None:
    """Damage in a column the summary does not read (``depth``, ``thread_name``) leaves the
    out-of-core summary as it was, undetected there; loading the table refuses it. Damage to
    the schema's metadata is refused by both."""
    from recfn.analysis.outofcore.files import summarize_files

    path = tmp_path / "t.parquet"
    recfn.Trace(table).save(path)
    expected = summarize_files([str(path)])
    stored = pq.read_table(path)
    depth = stored.column("depth").to_pylist()
    depth[3] += 1
    altered = with_column(stored, "depth", depth)
    pq.write_table(altered, path, use_compliant_nested_type=False)
    same(summarize_files([str(path)]), expected)
    with pytest.raises(TraceFormatError, match="content hash mismatch in column 'depth'"):
        recfn.load(path)
    metadata = dict(stored.schema.metadata or {})
    metadata[b"recfn.host"] = b"elsewhere"
    pq.write_table(stored.replace_schema_metadata(metadata), path, use_compliant_nested_type=False)
    for read in (recfn.load, lambda p: summarize_files([str(p)])):
        with pytest.raises(TraceFormatError, match="content hash mismatch in its column names"):
            read(path)


def defined_feed(h: Any, array: pa.Array) -> None:
    """What ``_digest._feed`` feeds for numbers and dictionaries, as the format defines it
    (written plainly: nulls dropped by Arrow, used values counted): the digests files carry."""
    h.update(len(array).to_bytes(8, "little"))
    if array.null_count:
        h.update(b"N")
        h.update(_digest._validity(array))
        array = array.drop_null()
    else:
        h.update(b"V")
    if pa.types.is_dictionary(array.type):
        indices = array.indices.to_numpy(zero_copy_only=False)
        values = array.dictionary.to_pylist()
        used = np.bincount(indices, minlength=len(values)) > 0
        ordered = sorted({value for value, hit in zip(values, used) if hit})
        rank_of = {value: rank for rank, value in enumerate(ordered)}
        ranks = np.array([rank_of.get(value, -1) for value in values], dtype=np.int32)
        _digest._feed(h, pa.array(ordered, array.dictionary.type))
        h.update(ranks.take(indices).astype("<i4").data)
    else:
        values = array.to_numpy(zero_copy_only=False)
        h.update(values.astype(values.dtype.newbyteorder("<")).data)


NUMBER_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint64()]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(0, 120)), max_size=60),
    st.sampled_from([*NUMBER_TYPES, pa.float16(), pa.float32(), pa.float64()]),
    st.integers(0, 70),
    st.integers(1, 40),
)
def test_numbers_and_dictionaries_hash_as_the_format_defines(
    numbers: list[int | None], dtype: pa.DataType, offset: int, names: int
) -> None:
    """The fast paths (nulls dropped by a numpy mask; used dictionary values found by a compare
    per value when they are few) feed what the format's definition feeds, sliced or not."""
    import xxhash

    if pa.types.is_floating(dtype):
        array = pa.array([None if x is None else float(x) for x in numbers], dtype)
    else:
        array = pa.array(numbers, dtype)
    labels = pa.array([None if x is None else f"v{x % names}" for x in numbers], pa.string())
    for whole in (array, labels.dictionary_encode(), pa.nulls(len(numbers), dtype)):
        for piece in (whole, whole.slice(min(offset, len(whole)))):
            fast, defined = xxhash.xxh3_128(), xxhash.xxh3_128()
            _digest._feed(fast, piece)
            defined_feed(defined, piece)
            assert fast.digest() == defined.digest()
