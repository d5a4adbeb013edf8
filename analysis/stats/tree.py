"""The call tree of an event table, vectorised.

Everything here works on row positions (0..n-1 in the frame's order) and returns numpy arrays;
parents are positions, -1 for roots. No function loops over events in Python: the loops that
remain run over tree levels or over powers of two.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from recfn.analysis.columns import (
    INT64_MAX,
    RANGE,
    EventColumns,
    Events,
    codes,
    event_columns,
    process_groups,
    require,
    thread_groups,
)
from recfn.errors import MalformedFrameError
from recfn.formats.nesting import INT64_MIN, depths, parents_from_nesting

MAX_TIME_NS = 1 << 62
"""Largest timestamp magnitude analysed (146 years of nanoseconds): any two times then differ
by less than int64 can hold."""


DENSE_IDS = 4
"""Ids spanning at most this many times their number are looked up in an array indexed by id
(a counter's ids, as captures number their rows, interleaved by thread): no hash table."""


def _dense_positions(ids: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Each id's row position in an array indexed by ``id - lowest`` (-1 where no row has that
    id), and ``lowest``; None when the ids are too sparse for one (`DENSE_IDS`) or repeat."""
    lowest, highest = int(ids.min()), int(ids.max())
    span = highest - lowest + 1
    if span > DENSE_IDS * len(ids):
        return None
    position = np.full(span, -1, dtype=np.int64)
    position[ids - lowest] = np.arange(len(ids), dtype=np.int64)
    if np.count_nonzero(position >= 0) < len(ids):
        return None  # an id repeats: the hashed path names it
    return position, lowest


def parents_from_ids(
    ids: np.ndarray,
    parent_ids: np.ndarray,
    has_parent: np.ndarray,
    process: np.ndarray | None = None,
) -> np.ndarray:
    """Positions of the rows that `parent_ids` name; -1 where null or not in the frame.

    With `process` (one code per row, see `schema.process_groups`) ids are looked up within
    each row's own process: ids are unique per process, not across a fleet.
    """
    parent = np.full(len(ids), -1, dtype=np.int64)
    wanted = np.flatnonzero(has_parent)
    if wanted.size == 0:
        return parent
    if process is not None:
        index = pd.MultiIndex.from_arrays([process, ids])
        if not index.is_unique:
            repeated = ids[index.duplicated()][:5].tolist()
            raise MalformedFrameError(
                f"the id column has duplicate values within a process (e.g. {repeated}); "
                "ids must be unique within each (host, pid)"
            )
        lookup = pd.MultiIndex.from_arrays([process[wanted], parent_ids[wanted]])
        parent[wanted] = index.get_indexer(lookup)
        return parent
    if ids.size > 1 and np.all(ids[1:] > ids[:-1]):
        found = np.searchsorted(ids, parent_ids[wanted]).clip(max=len(ids) - 1)
        hit = ids[found] == parent_ids[wanted]
        parent[wanted[hit]] = found[hit]
    elif (dense := _dense_positions(ids)) is not None:
        position, lowest = dense
        asked = parent_ids[wanted]
        inside = (asked >= lowest) & (asked < lowest + len(position))
        parent[wanted[inside]] = position[asked[inside] - lowest]
    else:
        index = pd.Index(ids)
        if not index.is_unique:
            repeated = index[index.duplicated()].unique()[:5].tolist()
            raise MalformedFrameError(
                f"the id column has duplicate values (e.g. {repeated}); "
                "ids must be unique within a trace"
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
    n = len(parent)
    linked = counted & (parent >= 0)
    linked &= counted.take(parent, mode="clip")  # roots read row 0, masked by the line above
    child = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)[linked]
    del linked
    own: np.ndarray
    if child.size == 0:
        own = np.subtract(end, start, out=np.zeros(n, dtype=np.int64), where=counted)
        return own
    up, child = _by_parent_then_start(parent, start, child)
    # In place where it can be, one scratch array for both gathers: large traces allocate
    # (and the machine pages in) only what is still needed.
    low = start[child]
    scratch = start[up]
    np.maximum(low, scratch, out=low)
    high = end[child]
    del child
    np.minimum(high, np.take(end, up, out=scratch, mode="clip"), out=high)  # unbuffered
    del scratch
    np.maximum(high, low, out=high)
    first = np.r_[True, up[1:] != up[:-1]]
    if np.all(first[1:] | (high[:-1] <= low[1:])):
        added = np.subtract(high, low, out=high)  # no sibling overlaps the one before it
        del low
    else:
        # Sorted by start within each parent, a child adds what lies past the furthest end of
        # the children before it: the union's length, without a loop over children.
        reach = pd.Series(high).groupby(up).cummax().to_numpy()
        covered_before = np.r_[INT64_MIN, reach[:-1]]
        covered_before[first] = INT64_MIN
        added = np.maximum(high - np.maximum(low, covered_before), 0)
    del first
    own = np.subtract(end, start, out=np.zeros(n, dtype=np.int64), where=counted)
    np.subtract.at(own, up, added)
    return own


def _by_parent_then_start(
    parent: np.ndarray, start: np.ndarray, child: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The parents of `child` (rows with a parent, ascending) and `child` itself, both ordered
    by parent, then start, then row. When the rows are in start order already (as recorded),
    that is the order of (parent, row): one sort of unique 64-bit keys, far cheaper than
    sorting by two keys."""
    if len(parent) < 2**31 and in_start_order(start):
        key = parent[child].astype(np.int64)
        key <<= 32
        key |= child
        key.sort()  # unique keys: any sort gives this order
        child = key.astype(np.int32)  # the low 32 bits
        key >>= 32
        return key.astype(parent.dtype), child
    child = child[np.lexsort((start[child], parent[child]))]
    return parent[child], child


def subtree_sums(
    parent: np.ndarray, values: np.ndarray, depth: np.ndarray | None = None
) -> np.ndarray:
    """Each row's value plus those of all its descendants, accumulated level by level.

    `depth` is ``depths(parent)`` when the caller has it already.
    """
    if depth is None:
        depth = depths(parent)
    total = values.astype(np.int64, copy=True)
    order = np.argsort(-depth, kind="stable")
    bounds = np.searchsorted(-depth[order], np.arange(-depth.max(initial=0), 1))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = order[lo:hi]
        np.add.at(total, parent[rows], total[rows])
    return total


def preorder(
    parent: np.ndarray, keys: tuple[np.ndarray, ...], depth: np.ndarray | None = None
) -> np.ndarray:
    """Row positions in depth-first order: each row directly followed by its subtree. Roots, and
    the children of each row, are ordered by `keys` (as for ``np.lexsort``: last key first).

    Vectorised: a row's place is its parent's plus one plus the subtree sizes of the siblings
    before it, resolved level by level; no walk over the rows.
    """
    n = len(parent)
    if depth is None:
        depth = depths(parent)
    size = subtree_sums(parent, np.ones(n, dtype=np.int64), depth)
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


def outermost(parent: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Rows that have no ancestor of their own `group`: where a group's rows nest, only the
    outermost count, so that a group's time is counted once however deep it nests.

    In depth-first order a row's subtree is the run of rows after it, so an earlier row of the
    same group is an ancestor exactly when its run reaches past the row.
    """
    n = len(parent)
    # Up from every row at once, a level a step, dropping rows that found their group: few
    # levels (as usual) cost a few passes, with no depths and no sort. The first level, which
    # most rows take part in, runs over all the rows without picking them out first.
    index = np.int32 if n < 2**31 else np.int64
    parents: np.ndarray = parent.astype(index, copy=False)
    has_parent = parents >= 0
    nested: np.ndarray = group[parents] == group  # [-1] where there is no parent: masked next
    nested &= has_parent
    going = has_parent & ~nested
    up = parents[parents]
    going &= up >= 0
    rows = np.flatnonzero(going).astype(index)
    del going, has_parent
    up = up[rows]
    wanted = group[rows]
    for _ in range(WALK_LEVELS - 1):
        if rows.size == 0:
            return ~nested
        same = group[up] == wanted
        nested[rows[same]] = True
        above = parents[up]
        going = ~same
        going &= above >= 0
        keep = np.flatnonzero(going)  # taken by position: quicker than three masked copies
        rows, up, wanted = rows.take(keep), above.take(keep), wanted.take(keep)
    if rows.size == 0:
        return ~nested
    n_groups = int(group.max(initial=-1)) + 1
    if n_groups <= 64 * MAX_MASK_WORDS:
        return _outermost_by_masks(parent, group, n_groups)
    depth = depths(parent)
    size = subtree_sums(parent, np.ones(n, dtype=np.int64), depth)
    place = np.empty(n, dtype=np.int64)
    place[preorder(parent, (np.arange(n),), depth)] = np.arange(n)
    seq = np.lexsort((place, group))
    g = group[seq]
    reach = pd.Series(place[seq] + size[seq]).groupby(g).cummax().to_numpy()
    before = np.r_[np.int64(-1), reach[:-1]]
    before[np.r_[True, g[1:] != g[:-1]]] = -1
    result = np.empty(n, dtype=bool)
    result[seq] = before <= place[seq]
    return result


WALK_LEVELS = 16
"""`outermost` walks up this many levels before it switches to a method whose cost does not
grow with the depth."""
MAX_MASK_WORDS = 4
"""`outermost` tracks the groups above each row in this many 64-bit words per row (so up to
256 groups: names, usually); with more groups it sorts in depth-first order instead."""


def _outermost_by_masks(parent: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """`outermost` for few groups: each row's set of ancestor groups as a bit mask, built
    level by level from its parent's (one pass over the rows, no sort by group)."""
    n = len(parent)
    words = (n_groups + 63) // 64
    known = group >= 0
    code = np.where(known, group, 0)
    word = code // 64
    bit = np.where(known, np.left_shift(np.uint64(1), (code % 64).astype(np.uint64)), 0)
    bit = bit.astype(np.uint64)
    depth = depths(parent)
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(1, depth.max(initial=0) + 2))
    above = np.zeros((n, words), dtype=np.uint64)  # groups of each row's ancestors
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = order[lo:hi]
        up = parent[rows]
        above[rows] = above[up]
        above[rows, word[up]] |= bit[up]
    return np.asarray((above[np.arange(n), word] & bit) == 0)


def parent_positions(df: Events) -> np.ndarray:
    """Parent positions from ``parent_id``, or from nesting per thread when the frame has none."""
    columns = event_columns(df)
    if columns.has("parent_id"):
        require(columns, ("id",), "parent lookup")
        return parents_from_ids(
            columns.ints("id", -1),
            columns.ints("parent_id", -1),
            ~columns.nulls("parent_id"),
            process_groups(columns),
        )
    require(columns, ("kind", "start_ns", "end_ns", "thread_id"), "parent reconstruction")
    start = columns.ints("start_ns", 0)
    end = columns.ints("end_ns", INT64_MAX)
    return parents_from_nesting(thread_groups(columns), start, end, columns.equals("kind", RANGE))


@dataclass(frozen=True)
class Nodes:
    """The rows of a frame as a checked forest, in the frame's order (row positions)."""

    parent: np.ndarray
    """Parent position of each row, -1 for roots (parent absent from the frame or null)."""
    start: np.ndarray
    end: np.ndarray
    """End of each row; ``INT64_MAX`` where null (open ranges)."""
    closed: np.ndarray
    """Ranges with an end: the rows that have a duration."""
    still_open: np.ndarray
    """Ranges without an end (still open when the profiler stopped)."""

    @property
    def duration(self) -> np.ndarray:
        """``end - start`` of closed ranges, 0 for every other row."""
        return np.where(self.closed, self.end - self.start, 0)

    @cached_property
    def depth(self) -> np.ndarray:
        """Number of ancestors of each row."""
        return depths(self.parent)


def nodes(df: Events, operation: str) -> Nodes:
    """The call forest of `df` (a frame, or `EventColumns`), after checking what the analyses
    rely on.

    Raises `MalformedFrameError` for null or duplicate ids, a cycle in ``parent_id``, a null
    ``start_ns``, a timestamp beyond `MAX_TIME_NS`, a range that ends before it starts, or
    durations whose sum overflows int64.
    Parents missing from the frame (a filtered or windowed frame) make roots, not errors.
    """
    columns = event_columns(df)
    require(columns, ("kind", "start_ns", "end_ns"), operation)
    if columns.has("parent_id"):
        require(columns, ("id",), operation)
        _refuse(columns.nulls("id"), columns, operation, "has null ids")
    _refuse(columns.nulls("start_ns"), columns, operation, "has a null start_ns")
    is_range = columns.equals("kind", RANGE)
    has_end = ~columns.nulls("end_ns")
    start = columns.ints("start_ns", 0)
    end = np.where(has_end, columns.ints("end_ns", 0), INT64_MAX)  # float columns cannot hold MAX
    closed = is_range & has_end
    finite_end = np.where(has_end, end, 0)
    far = (start > MAX_TIME_NS) | (start < -MAX_TIME_NS)
    far |= (finite_end > MAX_TIME_NS) | (finite_end < -MAX_TIME_NS)
    _refuse(far, columns, operation, f"has timestamps beyond +-{MAX_TIME_NS} ns")
    _refuse(closed & (end < start), columns, operation, "has ranges that end before they start")
    span = np.where(closed, end - start, 0)
    if float(span.sum(dtype=np.float64)) >= 2.0**63:
        raise MalformedFrameError(f"{operation}: the ranges' summed durations overflow int64")
    forest = Nodes(parent_positions(columns), start, end, closed, is_range & ~has_end)
    if not parents_come_first(forest.parent, start):
        try:
            forest.depth  # noqa: B018 (computed to find cycles, and kept)
        except ValueError:
            raise MalformedFrameError(
                f"{operation}: parent_id contains a cycle; a range cannot be its own ancestor"
            ) from None
    return forest


def parents_come_first(parent: np.ndarray, start: np.ndarray) -> bool:
    """Whether every parent starts before its child (or at the same time, earlier in the
    frame): then following parents always goes back in that order and cannot cycle."""
    step = 1 << 20  # in slices: large traces need no full-length temporaries
    if in_start_order(start):  # as recorded: then a parent comes first where its row does
        return all(
            bool(np.all(parent[low : low + step] < np.arange(low, min(low + step, len(parent)))))
            for low in range(0, len(parent), step)
        )
    for low in range(0, len(parent), step):
        child = np.flatnonzero(parent[low : low + step] >= 0) + low
        up = parent[child]
        if not np.all((start[up] < start[child]) | ((start[up] == start[child]) & (up < child))):
            return False
    return True


def in_start_order(start: np.ndarray) -> bool:
    """Whether the rows are in start order (as recorded)."""
    return bool(np.all(start[1:] >= start[:-1]))


def linked_parents(forest: Nodes) -> np.ndarray:
    """Parents of the closed ranges among closed ranges; -1 for every other row, and for a
    range whose parent is open or not a range."""
    linked = forest.closed & (forest.parent >= 0)
    linked &= forest.closed.take(forest.parent, mode="clip")  # roots read row 0: masked above
    return np.where(linked, forest.parent, -1)


def _refuse(bad: np.ndarray, columns: EventColumns, operation: str, problem: str) -> None:
    """Raise `MalformedFrameError` naming the first ids (or positions) of the `bad` rows."""
    if not bad.any():
        return
    rows = np.flatnonzero(bad)
    if columns.has("id"):
        which = "ids " + ", ".join(map(str, columns.objects("id", rows[:5]).tolist()))
    else:
        which = "rows " + ", ".join(map(str, rows[:5].tolist()))
    raise MalformedFrameError(
        f"{operation}: the frame {problem} ({rows.size} row(s); first: {which})"
    )


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
    forest = nodes(df, "call tree")
    in_tree = forest.closed
    parent = linked_parents(forest)
    duration = forest.duration
    row_self = self_durations(parent, forest.start, forest.end, in_tree)
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
