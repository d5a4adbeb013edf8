"""Parent reconstruction from interval nesting, depths, self times and tree navigation."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recfn
import recfn.analysis as analysis
from recfn.analysis.accessor import MAX_INDENT
from recfn.analysis.stats import tree
from recfn.analysis.stats.tree import (
    call_tree,
    depths,
    outermost,
    parents_from_nesting,
    self_durations,
    subtree_sums,
)


def stack_parents(
    group: np.ndarray, start: np.ndarray, end: np.ndarray, container: np.ndarray
) -> np.ndarray:
    """Reference: a stack walk over rows sorted by (group, start, -end), half-open intervals."""
    order = np.lexsort((~container, -end, start, group))
    parent = np.full(len(start), -1)
    stack: list[int] = []
    for i in order:
        while stack:
            top = stack[-1]
            if group[top] == group[i] and end[top] > start[i] and end[top] >= end[i]:
                break
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        if container[i] and end[i] > start[i]:
            stack.append(i)
    return parent


def test_nesting_rules() -> None:
    # Touching siblings, zero-length ranges at a range's start (inside) and end (not inside:
    # intervals are half-open), identical intervals (the earlier row is the parent), marks.
    start = np.array([0, 0, 5, 5, 5, 10, 10, 20, 0, 3, 0, 10])
    end = np.array([10, 5, 10, 10, 5, 10, 20, 20, 30, 3, 10, 10])
    container = np.array([1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1], dtype=bool)
    group = np.array([0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2])
    parent = parents_from_nesting(group, start, end, container)
    assert parent.tolist() == [-1, 0, 0, 2, 3, 6, -1, -1, -1, 8, -1, -1]
    assert parent.tolist() == stack_parents(group, start, end, container).tolist()


def test_open_ranges_contain_everything_after_them() -> None:
    big = np.iinfo(np.int64).max
    parent = parents_from_nesting(
        np.zeros(3, dtype=np.int64),
        np.array([0, 5, 50]),
        np.array([big, 10, 60]),
        np.ones(3, dtype=bool),
    )
    assert parent.tolist() == [-1, 0, 0]


def test_matches_the_generator_and_a_stack_walk() -> None:
    df = analysis.make_synthetic_trace(20_000, 3, n_marks=200, seed=5)
    group, start = df["thread_id"].to_numpy(), df["start_ns"].to_numpy()
    end = df["end_ns"].to_numpy(dtype=np.int64)
    container = (df["kind"] == "range").to_numpy()
    parent = parents_from_nesting(group, start, end, container)
    expected = df["parent_id"].fillna(-1).to_numpy(dtype=np.int64)  # ids are positions here
    assert np.array_equal(parent, expected)
    assert np.array_equal(parent, stack_parents(group, start, end, container))
    assert np.array_equal(depths(parent), df["depth"].to_numpy())


def test_random_overlaps_follow_the_stack_walk() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 60))
        start = rng.integers(0, 30, n)
        end = start + rng.integers(0, 12, n)
        container = rng.random(n) < 0.8
        end[~container] = start[~container]
        group = rng.integers(0, 3, n)
        got = parents_from_nesting(group, start, end, container)
        # The rule in force: the nearest earlier row (in start order) that reaches past both
        # this row's end and its start, which is what a stack walk gives for nested input.
        order = np.lexsort((~container, -end, start, group))
        for k, i in enumerate(order):
            candidates = [
                j
                for j in order[:k][::-1]
                if group[j] == group[i]
                and container[j]
                and end[j] > start[j]
                and end[j] >= max(end[i], start[i] + 1)
            ]
            assert got[i] == (candidates[0] if candidates else -1)


def test_depths_self_and_subtree_sums() -> None:
    parent = np.array([-1, 0, 0, 2, 2, -1, 5])
    assert depths(parent).tolist() == [0, 1, 1, 2, 2, 0, 1]
    start = np.array([0, 10, 40, 50, 60, 200, 210])
    end = np.array([100, 30, 90, 60, 75, 250, 220])
    counted = np.ones(7, dtype=bool)
    assert self_durations(parent, start, end, counted).tolist() == [30, 20, 25, 10, 15, 40, 10]
    counted[3] = False
    assert self_durations(parent, start, end, counted).tolist() == [30, 20, 35, 0, 15, 40, 10]
    assert subtree_sums(parent, np.array([1, 2, 3, 4, 5, 6, 7])).tolist() == [
        15,
        2,
        12,
        4,
        5,
        13,
        7,
    ]
    with pytest.raises(ValueError, match="cycle"):
        depths(np.array([1, 0]))


def test_self_time_counts_overlapping_children_once() -> None:
    # P [0, 100] has children A [10, 60], B [20, 80], C [70, 90] (concurrent, as gathered asyncio
    # tasks) and D [95, 130], which outlives P and counts up to P's end: they cover [10, 90] and
    # [95, 100], 85 ns. E is A's child. Q has two identical children, a mark and an open range.
    parent = np.array([-1, 0, 0, 0, 0, 1, -1, 6, 6, 6, 6])
    start = np.array([0, 10, 20, 70, 95, 40, 200, 210, 210, 220, 230])
    end = np.array([100, 60, 80, 90, 130, 50, 300, 250, 250, 220, 0])
    counted = np.array([1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0], dtype=bool)
    own = self_durations(parent, start, end, counted)
    assert own.tolist() == [15, 40, 60, 20, 35, 10, 60, 40, 40, 0, 0]


def test_self_time_matches_merging_intervals_one_by_one() -> None:
    rng = np.random.default_rng(1)
    for _ in range(30):
        n = int(rng.integers(1, 80))
        parent = np.where(rng.random(n) < 0.8, rng.integers(0, n, n), -1)
        parent[parent >= np.arange(n)] = -1  # parents come first: no cycles
        start = rng.integers(0, 100, n)
        end = start + rng.integers(0, 40, n)
        counted = rng.random(n) < 0.9
        expected = []
        for row in range(n):
            if not counted[row]:
                expected.append(0)
                continue
            spans = sorted(
                (max(start[c], start[row]), min(end[c], end[row]))
                for c in np.flatnonzero((parent == row) & counted)
            )
            covered, reach = 0, start[row]
            for low, high in spans:
                covered += max(high - max(low, reach), 0)
                reach = max(reach, high)
            expected.append(end[row] - start[row] - covered)
        assert self_durations(parent, start, end, counted).tolist() == expected


def test_reconstructed_tree_equals_recorded_one(known: pd.DataFrame) -> None:
    recorded = known.recfn.tree()
    rebuilt = known.drop(columns=["parent_id", "depth"]).recfn.tree()
    for column in ("parent_id", "depth", "duration_ns", "self_ns", "tree"):
        assert recorded[column].tolist() == rebuilt[column].tolist()


def test_tree_children_roots(known: pd.DataFrame) -> None:
    tree = known.recfn.tree()
    assert tree["id"].tolist() == [1, 2, 6, 3, 4, 5, 7, 8, 9]
    assert tree["tree"].tolist()[:5] == ["step", "  fwd", "  ckpt", "  bwd", "    mm"]
    assert tree["self_ns"].tolist()[:6] == [30, 20, 0, 25, 10, 15]
    assert tree["self_ns"].isna().tolist() == [False] * 8 + [True]
    assert tree["duration_ns"].iloc[-1] is pd.NA
    assert known.recfn.children(3)["id"].tolist() == [4, 5]
    assert known.recfn.children(1)["id"].tolist() == [2, 6, 3]
    assert known.recfn.children(9).empty
    assert known.recfn.roots()["id"].tolist() == [1, 7, 9]
    assert known.drop(columns="parent_id").recfn.children(7)["id"].tolist() == [8]
    with pytest.raises(KeyError, match="42"):
        known.recfn.children(42)
    for unknown in (42, "x", 3.5):  # recfn's error, a KeyError too, naming the id
        with pytest.raises(recfn.RecfnError, match=f"children: no event with id {unknown!r}$"):
            known.recfn.children(unknown)
    with pytest.raises(ValueError, match="cycle"):
        known.assign(
            parent_id=pd.array([2, 1, 1, 1, 3, 3, None, 7, None], dtype="Int64")
        ).recfn.tree()
    with pytest.raises(ValueError, match="duplicate"):
        known.assign(id=[1, 1, 2, 3, 4, 5, 6, 7, 8]).recfn.summary()


def test_tree_self_time_with_overlapping_children(overlapping: pd.DataFrame) -> None:
    tree = overlapping.recfn.tree().set_index("id")
    assert tree.loc[[1, 2, 3, 4, 5, 6], "self_ns"].tolist() == [15, 40, 60, 20, 35, 10]
    paths = call_tree(overlapping)
    assert sorted(zip(paths.total.tolist(), paths.self.tolist())) == [
        (10, 10),
        (35, 35),
        (100, 15),
        (130, 120),
    ]


def test_call_tree_merges_paths(known: pd.DataFrame) -> None:
    tree = call_tree(known)
    paths = {}
    for p in range(tree.total.size):
        names, q = [], p
        while q >= 0:
            names.append(str(tree.names[tree.name[q]]))
            q = tree.parent[q]
        paths[";".join(reversed(names))] = (int(tree.total[p]), int(tree.self[p]))
    assert paths == {
        "step": (150, 70),
        "step;fwd": (20, 20),
        "step;bwd": (50, 25),
        "step;bwd;mm": (25, 25),
        "step;mm": (10, 10),
    }


def test_start_order_is_not_needed(known: pd.DataFrame) -> None:
    shuffled = known.sample(frac=1, random_state=3).drop(columns="parent_id")
    assert shuffled.recfn.tree()["id"].tolist() == [1, 2, 6, 3, 4, 5, 7, 8, 9]
    assert shuffled.recfn.summary().loc["step", "self_ns"] == 70


def test_tree_is_depth_first_when_children_overlap(overlapping: pd.DataFrame) -> None:
    # By start alone, "decode" (child of the first fetch, at 40) would follow the second fetch (20).
    tree = overlapping.sample(frac=1, random_state=3).recfn.tree()
    assert tree["id"].tolist() == [1, 2, 6, 3, 4, 5]
    assert tree["tree"].tolist() == [
        "fetch_all",
        "  fetch",
        "    decode",
        "  fetch",
        "  fetch",
        "  parse",
    ]


def test_tree_order_is_a_preorder_on_a_large_trace() -> None:
    df = analysis.make_synthetic_trace(20_000, 4, n_marks=50, seed=5)
    tree = df.recfn.tree()
    parent = tree["parent_id"].fillna(-1).to_numpy(dtype=np.int64)
    ids = tree["id"].to_numpy()
    seen = {-1}
    stack: list[int] = []  # ids of the open ancestors: a row's parent must be on it
    for row_id, parent_id in zip(ids.tolist(), parent.tolist()):
        while stack and stack[-1] != parent_id:
            stack.pop()
        assert parent_id in seen and (parent_id == -1 or stack), row_id
        seen.add(row_id)
        stack.append(row_id)


def test_deep_chain_tree_stays_linear() -> None:
    # Regression: the indented "tree" column held depth x 2 spaces per row, O(rows x depth)
    # characters: 1.8 G characters (7 s) for a 30,000-deep chain.
    depth = 30_000
    ids = np.arange(1, depth + 1)
    df = pd.DataFrame(
        {
            "id": ids,
            "parent_id": pd.array([None, *ids[:-1]], dtype="Int64"),
            "name": "f",
            "kind": "range",
            "start_ns": ids,
            "end_ns": 3 * depth - ids,
            "thread_id": 1,
        }
    )
    tree = df.recfn.tree()
    assert tree["id"].tolist() == ids.tolist() and tree["depth"].iloc[-1] == depth - 1
    assert tree["tree"].str.len().max() <= 2 * MAX_INDENT + len(f"[{depth}] f")
    assert tree["tree"].iloc[-1] == "  " * MAX_INDENT + f"[{depth - 1}] f"
    assert tree["tree"].iloc[MAX_INDENT] == "  " * MAX_INDENT + "f"
    assert (tree["self_ns"] == 2).sum() == depth - 1


@st.composite
def forests(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """A random forest (parents before children) and a group per row."""
    n = draw(st.integers(1, 40))
    parent = np.array([draw(st.integers(-1, i - 1)) for i in range(n)], dtype=np.int64)
    group = np.array(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), np.int64)
    return parent, group


@given(forests())
@settings(max_examples=150, deadline=None)
def test_outermost_matches_an_ancestor_walk(forest: tuple[np.ndarray, np.ndarray]) -> None:
    parent, group = forest
    expected = []
    for row in range(len(parent)):
        up, nested = parent[row], False
        while up >= 0:
            nested |= group[up] == group[row]
            up = parent[up]
        expected.append(not nested)
    assert outermost(parent, group).tolist() == expected  # walking up
    chain = np.arange(-1, len(parent) - 1)  # one chain as deep as the forest is long
    on_chain = [not np.any(group[:row] == group[row]) for row in range(len(parent))]
    with patch.object(tree, "WALK_LEVELS", 0):  # the methods past the walk's levels
        assert outermost(parent, group).tolist() == expected  # bit masks (few groups)
        spread = group * 97  # past 256 groups: the depth-first sort
        assert outermost(parent, spread).tolist() == expected
    assert outermost(chain, group).tolist() == on_chain


@st.composite
def timed_rows(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows with any parents (none is its own), intervals that may overlap or outlive their
    parent, some not counted; in start order or not (self time sorts children either way)."""
    n = draw(st.integers(1, 30))
    parent = np.array(
        [draw(st.sampled_from([-1, *(j for j in range(n) if j != i)])) for i in range(n)]
    )
    start = np.array(draw(st.lists(st.integers(0, 60), min_size=n, max_size=n)), np.int64)
    if draw(st.booleans()):
        start.sort()
    end = start + np.array(draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)), np.int64)
    counted = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    return parent, start, end, counted


@given(timed_rows())
@settings(max_examples=200, deadline=None)
def test_self_time_and_parents_first_match_their_definitions(
    rows: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:
    parent, start, end, counted = rows
    expected = []
    for row in range(len(parent)):
        if not counted[row]:
            expected.append(0)
            continue
        covered: set[int] = set()  # the nanoseconds the counted children cover, clipped
        for child in np.flatnonzero((parent == row) & counted):
            covered.update(range(max(start[child], start[row]), min(end[child], end[row])))
        expected.append(int(end[row] - start[row]) - len(covered))
    assert self_durations(parent, start, end, counted).tolist() == expected
    first = all(
        start[up] < start[row] or (start[up] == start[row] and up < row)
        for row, up in enumerate(parent)
        if up >= 0
    )
    assert tree.parents_come_first(parent, start) is first


def looked_up(ids: np.ndarray, parent_ids: np.ndarray, has_parent: np.ndarray) -> np.ndarray:
    """Reference: each row's parent row by a dict, -1 where null or no row has that id."""
    row_of = {int(i): row for row, i in enumerate(ids)}
    found = [row_of.get(int(p), -1) if has else -1 for p, has in zip(parent_ids, has_parent)]
    return np.array(found, dtype=np.int64)


@settings(max_examples=300, deadline=None)
@given(
    base=st.sampled_from([0, -3, 1 << 40, (1 << 63) - 31, -(1 << 63)]),  # int64 max reached
    rows=st.lists(
        st.tuples(st.integers(0, 30), st.one_of(st.none(), st.integers(-5, 35), st.just("far"))),
        min_size=1,
        max_size=25,
    ),
)
def test_parents_by_id_with_or_without_the_dense_array(
    base: int, rows: list[tuple[int, int | str | None]]
) -> None:
    """The dense array (ids close together) and the hashed lookup find the same rows, and
    both refuse a repeated id; parent ids outside the ids' span (even at int64's ends) and
    null ones are not found."""
    ids = np.array([base + offset for offset, _ in rows], dtype=np.int64)[::-1].copy()
    asked = [parent for _, parent in rows][::-1]
    edge = -(1 << 63) if base > 0 else (1 << 63) - 1
    parent_ids = np.array(
        [
            0
            if p is None
            else edge
            if p == "far" or not -(1 << 63) <= base + p < 1 << 63
            else base + p
            for p in asked
        ],
        dtype=np.int64,
    )
    has_parent = np.array([p is not None for p in asked], dtype=bool)
    offsets = [offset for offset, _ in rows]
    if len(set(offsets)) < len(offsets):
        if has_parent.any():  # (nothing to look up: nothing checked)
            for dense in (tree.DENSE_IDS, 0):
                with patch.object(tree, "DENSE_IDS", dense):
                    with pytest.raises(analysis.MalformedFrameError, match="duplicate"):
                        tree.parents_from_ids(ids, parent_ids, has_parent)
        return
    with patch.object(tree, "DENSE_IDS", 0):
        hashed = tree.parents_from_ids(ids, parent_ids, has_parent)
    spread = max(offsets) - min(offsets) + 1
    assert (tree._dense_positions(ids) is not None) == (spread <= tree.DENSE_IDS * len(ids))
    dense = tree.parents_from_ids(ids, parent_ids, has_parent)
    assert dense.tolist() == hashed.tolist() == looked_up(ids, parent_ids, has_parent).tolist()
