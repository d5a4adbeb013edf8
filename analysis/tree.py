"""The call tree of an event table, vectorised.

Everything here works on row positions (0..n-1 in the frame's order) and returns numpy arrays;
parents are positions, -1 for roots. No function loops over events in Python: the loops that
remain run over tree levels or over powers of two.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from recfn._nesting import INT64_MIN, depths, parents_from_nesting

from .schema import INT64_MAX, RANGE, codes, equals, ints, nulls, require, thread_groups


def parents_from_ids(ids: np.ndarray, parent_ids: np.ndarray, has_parent: np.ndarray) -> np.ndarray:
    """Positions of the rows that `parent_ids` name; -1 where null or not in the frame."""
    parent = np.full(len(ids), -1, dtype=np.int64)
    wanted = np.flatnonzero(has_parent)
    if wanted.size == 0:
        return parent
    if ids.size > 1 and np.all(ids[1:] > ids[:-1]):
        found = np.searchsorted(ids, parent_ids[wanted]).clip(max=len(ids) - 1)
        hit = ids[found] == parent_ids[wanted]
        parent[wanted[hit]] = found[hit]
    else:
        index = pd.Index(ids)
        if not index.is_unique:
            raise ValueError(
                "the id column has duplicate values; ids must be unique within a trace"
            )
        parent[wanted] = index.get_indexer(parent_ids[wanted])
    return parent


def self_durations(
    parent: np.ndarray, start: np.ndarray, end: np.ndarray, counted: np.ndarray
) -> np.ndarray:
    """Self time of the rows in `counted` (closed ranges), 0 for the others: the duration minus
    the time that the row's direct children in `counted` cover, i.e. the length of the union of
    their intervals clipped to the row's own.

    Children can overlap: asyncio tasks gathered inside a range run concurrently, and a task can
    outlive the range that started it. Summing their durations would count time twice and make
    self time negative; the union never exceeds the row's duration.
    """
    duration = np.where(counted, end - start, 0)
    child = np.flatnonzero(counted & (parent >= 0))
    child = child[counted[parent[child]]]
    if child.size == 0:
        return duration
    child = child[np.lexsort((start[child], parent[child]))]
    up = parent[child]
    low = np.maximum(start[child], start[up])
    high = np.maximum(np.minimum(end[child], end[up]), low)
    # Sorted by start within each parent, a child adds what lies past the furthest end of the
    # children before it: the union's length, without a loop over children.
    first = np.r_[True, up[1:] != up[:-1]]
    reach = pd.Series(high).groupby(up).cummax().to_numpy()
    covered_before = np.r_[INT64_MIN, reach[:-1]]
    covered_before[first] = INT64_MIN
    added = np.maximum(high - np.maximum(low, covered_before), 0)
    covered = np.zeros(len(parent), dtype=np.int64)
    covered[up[first]] = np.add.reduceat(added, np.flatnonzero(first))
    return duration - covered


def subtree_sums(parent: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each row's value plus those of all its descendants, accumulated level by level."""
    depth = depths(parent)
    total = values.astype(np.int64, copy=True)
    order = np.argsort(-depth, kind="stable")
    bounds = np.searchsorted(-depth[order], np.arange(-depth.max(initial=0), 1))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = order[lo:hi]
        np.add.at(total, parent[rows], total[rows])
    return total


def preorder(parent: np.ndarray, keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """Row positions in depth-first order: each row directly followed by its subtree. Roots, and
    the children of each row, are ordered by `keys` (as for ``np.lexsort``: last key first).

    Vectorised: a row's place is its parent's plus one plus the subtree sizes of the siblings
    before it, resolved level by level; no walk over the rows.
    """
    n = len(parent)
    depth = depths(parent)
    size = subtree_sums(parent, np.ones(n, dtype=np.int64))
    order = np.lexsort((*keys, parent))  # grouped by parent, siblings in key order
    group, sizes = parent[order], size[order]
    first = np.r_[True, group[1:] != group[:-1]] if n else np.zeros(0, dtype=bool)
    before = np.cumsum(sizes) - sizes  # nondecreasing: the group's first value is its start
    place = np.empty(n, dtype=np.int64)
    place[order] = before - np.maximum.accumulate(np.where(first, before, 0))
    rows_by_depth = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[rows_by_depth], np.arange(1, depth.max(initial=0) + 2))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = rows_by_depth[lo:hi]
        place[rows] += place[parent[rows]] + 1
    positions = np.empty(n, dtype=np.int64)
    positions[place] = np.arange(n)
    return positions


def parent_positions(df: pd.DataFrame) -> np.ndarray:
    """Parent positions from ``parent_id``, or from nesting per thread when the frame has none."""
    if "parent_id" in df.columns:
        require(df, ("id",), "parent lookup")
        parent_id = df["parent_id"]
        return parents_from_ids(ints(df["id"], -1), ints(parent_id, -1), ~nulls(parent_id))
    require(df, ("kind", "start_ns", "end_ns", "thread_id"), "parent reconstruction")
    start = ints(df["start_ns"], 0)
    end = ints(df["end_ns"], INT64_MAX)
    return parents_from_nesting(thread_groups(df), start, end, equals(df["kind"], RANGE))


@dataclass(frozen=True)
class CallTree:
    """Ranges merged by call path (the sequence of names from a root), as in a flame graph.

    Row arrays have one entry per frame row; path arrays one entry per distinct call path.
    """

    row_path: np.ndarray
    """Path of each row; -1 for rows that are not closed ranges."""
    parent: np.ndarray
    name: np.ndarray
    """Code of each path's last name, into `names`."""
    depth: np.ndarray
    total: np.ndarray
    self: np.ndarray
    names: pd.Index


def call_tree(df: pd.DataFrame) -> CallTree:
    """Merge the closed ranges of `df` by call path; paths are numbered root level first.

    A range whose parent is missing, open or not a range starts a path of its own.
    """
    require(df, ("name", "kind", "start_ns", "end_ns"), "call tree")
    in_tree = equals(df["kind"], RANGE) & ~nulls(df["end_ns"])
    parent = parent_positions(df)
    linked = in_tree & (parent >= 0)
    linked[linked] = in_tree[parent[linked]]
    parent = np.where(linked, parent, -1)
    start, end = ints(df["start_ns"], 0), ints(df["end_ns"], 0)
    duration = np.where(in_tree, end - start, 0)
    row_self = self_durations(parent, start, end, in_tree)
    name_code, names = codes(df["name"])

    tree_rows = np.flatnonzero(in_tree)
    row_depth = depths(parent)[tree_rows]
    order = tree_rows[np.argsort(row_depth, kind="stable")]
    bounds = np.searchsorted(np.sort(row_depth), np.arange(row_depth.max(initial=-1) + 2))
    row_path = np.full(len(df), -1, dtype=np.int64)
    radix = len(names) + 1
    path_parent: list[np.ndarray] = []
    path_name: list[np.ndarray] = []
    path_depth: list[np.ndarray] = []
    n_paths = 0
    for level, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        rows = order[lo:hi]
        up = np.where(parent[rows] >= 0, row_path[parent[rows]], -1)
        keys, inverse = np.unique((up + 1) * radix + name_code[rows] + 1, return_inverse=True)
        row_path[rows] = inverse + n_paths
        path_parent.append(keys // radix - 1)
        path_name.append(keys % radix - 1)
        path_depth.append(np.full(len(keys), level, dtype=np.int64))
        n_paths += len(keys)

    def per_path(values: np.ndarray) -> np.ndarray:
        sums = np.bincount(row_path[tree_rows], weights=values[tree_rows], minlength=n_paths)
        return np.rint(sums).astype(np.int64)

    def joined(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)

    return CallTree(
        row_path=row_path,
        parent=joined(path_parent),
        name=joined(path_name),
        depth=joined(path_depth),
        total=per_path(duration),
        self=per_path(row_self),
        names=names,
    )
