"""Level-of-detail queries over an event table, for the interactive timeline.

The kernel keeps the trace; the browser asks for what its viewport shows. ``TimelineIndex`` sorts
the ranges once per (lane, depth) by start, so a query ``[t0, t1)`` at ``width_px`` pixels finds
the visible ranges with two binary searches per row (the row's longest range bounds how early a
visible one can start). Ranges at least one pixel long come back one by one; shorter ones are
merged into per-pixel density buckets (how many started there, how busy the pixel is), computed
from prefix sums so a zoomed-out view of a million ranges costs O(rows x pixels x log n).

Times in requests and responses are integer nanoseconds relative to ``origin_ns`` (the earliest
event), which a JavaScript double holds exactly for 104 days.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from recfn.analysis.plots.colors import NameColors
from recfn.analysis.stats.tree import parents_from_ids, self_durations
from recfn.errors import QueryError
from recfn.formats.schema import process_codes, valid_flags
from recfn.notebook_ext.widget.names import short_name

MAX_RANGES = 5_000
"""Ranges drawn one by one per response at most; the shortest beyond it merge into density."""
MAX_DENSITY_CELLS = 30_000
"""Density buckets per response at most; buckets widen (2, 4, ... pixels) to stay under it."""
MAX_WIDTH_PX = 8_192
"""Widest viewport a query accepts."""
MAX_TREE_NODES = 3_000
"""Call-tree nodes per response at most, the largest by total time (a closed subtree)."""
MAX_SEARCH_NAMES = 1_000
"""Names a search returns at most."""


@dataclass(frozen=True)
class Lane:
    """One horizontal band: a thread's ranges (``kind="ranges"``) or a memory counter."""

    label: str
    kind: str
    depth: int  # rows of ranges (max depth + 1); 1 for a memory lane


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Dictionary codes (int64, -1 for null) and values of a string or dictionary column."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    array = column.unify_dictionaries().combine_chunks()
    codes = np.asarray(array.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return codes, [str(v) for v in array.dictionary.to_pylist()]


def _ints(table: pa.Table, name: str, null: int) -> np.ndarray:
    column = table.column(name).fill_null(null)
    return np.asarray(column.to_numpy(), dtype=np.int64)


def _lanes_of(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``columns`` side by side, sorted (``np.unique(axis=0)``), and the
    index of each row's: each column coded on its own first, then one 1-D unique of the
    combined code (a sort of int64, many times quicker than sorting rows of three)."""
    values, codes = zip(*(_unique_inverse(column) for column in columns))
    if float(np.prod([v.size for v in values], dtype=np.float64)) >= 2.0**62:  # no room
        keys, inverse = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
        return keys.astype(np.int64), np.asarray(inverse, dtype=np.int64).reshape(-1)
    combined = np.zeros(columns[0].size, dtype=np.int64)
    for distinct, code in zip(values, codes):
        combined = combined * distinct.size + code
    keys, inverse = _unique_inverse(combined)
    lane_keys = np.empty((keys.size, len(columns)), dtype=np.int64)
    for i in reversed(range(len(columns))):
        lane_keys[:, i] = values[i][keys % values[i].size]
        keys = keys // values[i].size
    return lane_keys, np.asarray(inverse, dtype=np.int64)


def _unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)``, without its sort where every value is one
    (a trace of one process: its host and pid columns, a single thread)."""
    if values.size and values.min() == values.max():
        return values[:1], np.zeros(values.size, dtype=np.intp)
    distinct, inverse = np.unique(values, return_inverse=True)
    return distinct, inverse.reshape(-1)


class TimelineIndex:
    """Sorted arrays of one trace that answer viewport, tooltip, search and call-tree requests.

    ``table`` is an event table (docs/schema.md). Ranges still open when the trace ended are drawn
    up to the trace's last timestamp. Building costs a few sorts; every query after that touches
    only what its window shows.
    """

    def __init__(self, table: pa.Table) -> None:
        missing = [
            c
            for c in ("id", "parent_id", "name", "kind", "start_ns", "end_ns", "thread_id")
            if c not in table.column_names
        ]
        if missing:
            raise QueryError(
                f"the timeline needs the event-table column(s) {', '.join(missing)} "
                "(see docs/schema.md)"
            )
        self.table = table
        kind_codes, kinds = _codes(table.column("kind"))

        def of_kind(name: str) -> np.ndarray:
            return kind_codes == kinds.index(name) if name in kinds else kind_codes < -1

        self.name_codes, self.names = _codes(table.column("name"))
        start = _ints(table, "start_ns", 0)
        has_end = valid_flags(table.column("end_ns"))
        raw_end = _ints(table, "end_ns", 0)
        n = table.num_rows
        self.origin_ns = int(start.min()) if n else 0
        last = int(max(start.max(initial=0), raw_end.max(initial=0))) if n else 0
        end = np.where(has_end, raw_end, last)
        self.span_ns = max(last - self.origin_ns, 1)
        self.has_end = has_end

        is_range = of_kind("range")
        ids = _ints(table, "id", -1)
        process = process_codes(table)  # ids are unique within a process, not a dataset
        parent = parents_from_ids(
            ids,
            _ints(table, "parent_id", -1),
            valid_flags(table.column("parent_id")),
            process,
        )
        self.self_ns = self_durations(parent, start, end, is_range)
        self.parent = parent
        self.is_range = is_range
        self.start = start - self.origin_ns
        self.end = end - self.origin_ns

        closed = is_range & has_end
        weight = np.bincount(
            self.name_codes[closed] + 1,
            weights=(end - start)[closed].astype(np.float64),
            minlength=len(self.names) + 1,
        )[1:]
        self.colors = NameColors(self.names, weight)  # as the PNG and the flame graph colour
        self._short: dict[int, str] = {}
        self._matches: tuple[tuple[int, ...], np.ndarray] = ((), np.zeros(1, dtype=np.int64))

        self.lanes: list[Lane] = []
        self._build_range_lanes(table, is_range, process)
        self._build_memory_lanes(table, of_kind("memory"))

    # -- building ----------------------------------------------------------------------------

    def _build_range_lanes(
        self, table: pa.Table, is_range: np.ndarray, process: Optional[np.ndarray]
    ) -> None:
        rows = np.flatnonzero(is_range)
        if process is None:
            process = np.zeros(len(is_range), dtype=np.int64)
        pid = _ints(table, "pid", -1) if "pid" in table.column_names else np.full(len(is_range), -1)
        pid_null = (  # labelled "?": no process id, apart from any pid (-1 too)
            table.column("pid").is_null().to_numpy(zero_copy_only=False)
            if "pid" in table.column_names
            else np.zeros(len(is_range), dtype=bool)
        )
        thread = _ints(table, "thread_id", -1)
        thread_codes, thread_names = (
            _codes(table.column("thread_name"))
            if "thread_name" in table.column_names
            else (np.full(len(is_range), -1), [])
        )
        depth_all = (
            _ints(table, "depth", 0) if "depth" in table.column_names else np.zeros(len(is_range))
        )
        depth_all = np.maximum(depth_all, 0).astype(np.int64)

        # Lanes in (host, pid, thread_id) order, so that a host's lanes are together.
        if "host" in table.column_names:
            host_codes, host_names = _codes(table.column("host"))
            by_name = np.argsort(np.argsort(np.array(host_names, dtype=object)))
            host_rank = np.where(host_codes >= 0, by_name[np.maximum(host_codes, 0)], -1)
        else:
            host_rank, host_names = np.full(len(is_range), -1), []
        # (a null pid is a process apart from any pid: `process_codes`)
        lane_keys, lane_of = _lanes_of(host_rank[rows], pid[rows], process[rows], thread[rows])
        lane_hosts = sorted(host_names)
        several_hosts = len(np.unique(lane_keys[:, 0])) > 1
        several_pids = len(np.unique(lane_keys[:, 2])) > 1
        depth = depth_all[rows]
        # One sorted run per (lane, depth): rows sorted by start inside it.
        starts = self.start[rows]
        if bool(np.all(starts[1:] >= starts[:-1])):  # as recorded: a stable sort keeps it
            order = np.argsort(lane_of * (int(depth.max(initial=0)) + 1) + depth, kind="stable")
        else:
            order = np.lexsort((starts, depth, lane_of))
        self._rows = rows[order]
        self._lane = lane_of[order]
        self._depth = depth[order]
        self._s = self.start[self._rows]
        self._e = self.end[self._rows]
        self._dur = self._e - self._s
        self._csum = np.concatenate([[0], np.cumsum(self._dur, dtype=np.int64)])
        if self._rows.size:
            change = np.flatnonzero((np.diff(self._lane) != 0) | (np.diff(self._depth) != 0)) + 1
            bounds = np.concatenate([[0], change, [self._rows.size]])
        else:
            bounds = np.zeros(1, dtype=np.int64)
        self._groups: list[tuple[int, int, int, int, int]] = []
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            longest = int(self._dur[lo:hi].max())
            self._groups.append((int(self._lane[lo]), int(self._depth[lo]), lo, hi, longest))
        lane_first = np.searchsorted(self._lane, np.arange(len(lane_keys)))
        lane_last = np.searchsorted(self._lane, np.arange(len(lane_keys)), side="right") - 1
        for index, (first, last) in enumerate(zip(lane_first.tolist(), lane_last.tolist())):
            row = int(self._rows[first])
            code = int(thread_codes[row])
            label = thread_names[code] if code >= 0 else f"thread {thread[row]}"
            if several_pids:
                label = f"pid {'?' if pid_null[row] else lane_keys[index, 1]} / {label}"
            if several_hosts:
                host = int(lane_keys[index, 0])
                label = f"{lane_hosts[host] if host >= 0 else '?'} / {label}"
            depth_rows = int(self._depth[last]) + 1  # sorted by depth within the lane
            self.lanes.append(Lane(label=label, kind="ranges", depth=depth_rows))

    def _build_memory_lanes(self, table: pa.Table, is_memory: np.ndarray) -> None:
        self._memory: list[tuple[int, np.ndarray, np.ndarray]] = []
        if not is_memory.any() or "memory_bytes" not in table.column_names:
            return
        rows = np.flatnonzero(is_memory)
        amount = _ints(table, "memory_bytes", 0)[rows]
        if "device" in table.column_names:
            device_codes, devices = _codes(table.column("device"))
            device = device_codes[rows]
        else:
            device, devices = np.zeros(rows.size, dtype=np.int64), ["cpu"]
        for code in np.unique(device).tolist():
            mine = rows[device == code]
            order = np.argsort(self.start[mine], kind="stable")
            times = self.start[mine][order]
            level = np.cumsum(amount[device == code][order])
            label = devices[code] if 0 <= code < len(devices) else "memory"
            self._memory.append((len(self.lanes), times, level))
            self.lanes.append(Lane(label=f"memory ({label})", kind="memory", depth=1))

    # -- queries -----------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """What a view needs before its first query: lanes, span, origin and range count."""
        return {
            "origin_ns": self.origin_ns,
            "span_ns": self.span_ns,
            "ranges": int(self._rows.size),
            "lanes": [
                {"label": lane.label, "kind": lane.kind, "depth": lane.depth} for lane in self.lanes
            ],
        }

    def query(
        self, t0: float, t1: float, width_px: int, highlight: Sequence[int] = ()
    ) -> dict[str, Any]:
        """What the window ``[t0, t1)`` (ns from ``origin_ns``) shows at ``width_px`` pixels.

        Returns ``ranges`` (columns ``lane, depth, start, end, name, self, row``: the ranges of
        at least one pixel, the longest ``MAX_RANGES``), ``density`` (columns ``lane, depth,
        px, count, busy``: ranges merged per bucket of ``bucket_px`` pixels, ``busy`` in 1/255
        of the bucket; with ``highlight``, name ids, also ``match``: how many of the merged
        ranges have one of those names, and ``matches``: how many ranges of the whole trace
        do), ``memory`` (per memory lane, the min and max level per pixel) and the names used
        (`names_of`). Raises `QueryError` for an empty window or a
        width outside 1..``MAX_WIDTH_PX``.
        """
        if not (isinstance(width_px, (int, np.integer)) and 1 <= width_px <= MAX_WIDTH_PX):
            raise QueryError(f"width_px must be an int in 1..{MAX_WIDTH_PX}, got {width_px!r}")
        t0, t1 = float(t0), float(t1)
        if not (np.isfinite(t0) and np.isfinite(t1) and t1 > t0):
            raise QueryError(f"the window needs finite t0 < t1, got t0={t0!r}, t1={t1!r}")
        width = int(width_px)
        px = (t1 - t0) / width
        long_parts: list[np.ndarray] = []
        short_runs: list[tuple[int, int, int, int]] = []
        for lane, depth, lo, hi, longest in self._groups:
            starts = self._s[lo:hi]
            first = lo + int(np.searchsorted(starts, t0 - longest, side="left"))
            last = lo + int(np.searchsorted(starts, t1, side="left"))
            if last <= first:
                continue
            visible = self._e[first:last] > t0
            is_long = visible & (self._dur[first:last] >= px)
            long_parts.append(first + np.flatnonzero(is_long))
            short_runs.append((lane, depth, lo, hi))
        drawn = np.concatenate(long_parts) if long_parts else np.empty(0, dtype=np.int64)
        if drawn.size > MAX_RANGES:
            keep = np.argpartition(-self._dur[drawn], MAX_RANGES - 1)[:MAX_RANGES]
            drawn = drawn[keep]
        drawn = np.sort(drawn)
        matching = self._match_sums(highlight) if len(highlight) else None
        density = self._density(short_runs, drawn, t0, t1, width, matching)
        rows = self._rows[drawn]
        name_ids = self.name_codes[rows]
        used = np.unique(name_ids[name_ids >= 0])
        return {
            "t0": t0,
            "t1": t1,
            "width_px": width,
            "ranges": {
                "lane": self._lane[drawn].tolist(),
                "depth": self._depth[drawn].tolist(),
                "start": self._s[drawn].tolist(),
                "end": self._e[drawn].tolist(),
                "name": name_ids.tolist(),
                "self": self.self_ns[rows].tolist(),
                "row": rows.tolist(),
            },
            "density": density,
            "memory": self._memory_levels(t0, t1, width),
            "matches": int(matching[-1]) if matching is not None else 0,
            **self.names_of(used.tolist()),
        }

    def names_of(self, ids: Iterable[int]) -> dict[str, dict[int, str]]:
        """What a view needs to show the names ``ids``: ``names`` (id -> full name), ``short``
        (id -> short name, where it differs: `names.short_name`) and ``colors`` (id ->
        ``#rrggbb``, `NameColors`: the colours of the PNG timeline and the flame graph)."""
        full: dict[int, str] = {}
        short: dict[int, str] = {}
        colors: dict[int, str] = {}
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.names):
                continue
            full[i] = self.names[i]
            brief = self._short.get(i)
            if brief is None:
                brief = self._short[i] = short_name(self.names[i])
            if brief != full[i]:
                short[i] = brief
            colors[i] = self.colors.hex(i)
        return {"names": full, "short": short, "colors": colors}

    def _match_sums(self, highlight: Sequence[int]) -> np.ndarray:
        """Prefix sums, in the runs' order, of the ranges whose name is in ``highlight`` (kept
        for the last set asked for: a search is followed by many queries with it)."""
        key = tuple(sorted({int(i) for i in highlight}))
        if key != self._matches[0]:
            hit = np.isin(self.name_codes[self._rows], np.array(key, dtype=np.int64))
            self._matches = (key, np.concatenate([[0], np.cumsum(hit, dtype=np.int64)]))
        return self._matches[1]

    def matches(self, ids: Sequence[int]) -> int:
        """How many ranges have one of the names ``ids``."""
        return int(self._match_sums(ids)[-1]) if len(ids) else 0

    def _density(
        self,
        runs: list[tuple[int, int, int, int]],
        drawn: np.ndarray,
        t0: float,
        t1: float,
        width: int,
        matching: Optional[np.ndarray] = None,
    ) -> dict[str, Any]:
        """Per (lane, depth) row, the ranges not drawn, merged per bucket by their start.

        All ranges starting in a bucket come from the run's prefix sums (two binary searches per
        bucket edge); the drawn ones are then taken back out. ``matching``, prefix sums of the
        highlighted ranges (`_match_sums`), adds how many of each bucket's are highlighted.
        """
        bucket_px = 1
        while len(runs) * (width // bucket_px + 1) > 4 * MAX_DENSITY_CELLS and bucket_px < width:
            bucket_px *= 2
        out: dict[str, list[Any]] = {"lane": [], "depth": [], "px": [], "count": [], "busy": []}
        if matching is not None:
            out["match"] = []
        while True:
            buckets = -(-width // bucket_px)
            step = (t1 - t0) / width * bucket_px
            edges = t0 + step * np.arange(buckets + 1)
            cells = 0
            for key in out:
                out[key] = []
            for lane, depth, lo, hi in runs:
                position = lo + np.searchsorted(self._s[lo:hi], edges, side="left")
                count = np.diff(position)
                busy = np.diff(self._csum[position]).astype(np.float64)
                match = np.diff(matching[position]) if matching is not None else None
                mine = drawn[np.searchsorted(drawn, lo) : np.searchsorted(drawn, hi)]
                if mine.size:
                    bucket = np.clip(((self._s[mine] - t0) // step).astype(np.int64), 0, None)
                    inside = bucket < buckets
                    bucket, mine = bucket[inside], mine[inside]
                    inside = self._s[mine] >= t0
                    bucket, mine = bucket[inside], mine[inside]
                    count -= np.bincount(bucket, minlength=buckets)
                    busy -= np.bincount(bucket, weights=self._dur[mine], minlength=buckets)
                    if match is not None and matching is not None:
                        lit = (matching[mine + 1] - matching[mine]).astype(np.int64)
                        match -= np.bincount(bucket, weights=lit, minlength=buckets).astype(
                            np.int64
                        )
                hit = np.flatnonzero(count > 0)
                if hit.size == 0:
                    continue
                cells += hit.size
                level = np.clip(np.ceil(busy[hit] / step * 255), 1, 255).astype(np.int64)
                out["lane"].append(lane)
                out["depth"].append(depth)
                out["px"].append((hit * bucket_px).tolist())
                out["count"].append(count[hit].tolist())
                out["busy"].append(level.tolist())
                if match is not None:
                    out["match"].append(match[hit].tolist())
            if cells <= MAX_DENSITY_CELLS or bucket_px >= width:
                return {"bucket_px": bucket_px, **out}
            bucket_px *= 2

    def _memory_levels(self, t0: float, t1: float, width: int) -> list[dict[str, Any]]:
        """Per memory lane, the lowest and highest level each pixel sees (bytes)."""
        edges = t0 + (t1 - t0) / width * np.arange(width + 1)
        result = []
        for lane, times, level in self._memory:
            padded = np.concatenate([[0], level, [0]])  # the trailing 0 only pads reduceat
            position = np.searchsorted(times, edges, side="right")
            at_edge = padded[position]  # the level in force at each edge
            low = np.minimum(at_edge[:-1], at_edge[1:])
            high = np.maximum(at_edge[:-1], at_edge[1:])
            busy = np.flatnonzero(position[1:] > position[:-1])
            if busy.size:
                # Pixel i holds the events at padded[position[i] + 1 : position[i + 1] + 1].
                bounds = np.stack([position[busy] + 1, position[busy + 1] + 1], axis=1).ravel()
                high[busy] = np.maximum(high[busy], np.maximum.reduceat(padded, bounds)[::2])
                low[busy] = np.minimum(low[busy], np.minimum.reduceat(padded, bounds)[::2])
            result.append({"lane": lane, "low": low.tolist(), "high": high.tolist()})
        return result

    def detail(self, row: int) -> dict[str, Any]:
        """Everything a tooltip shows about row ``row`` of the table, args and shapes included."""
        if not (isinstance(row, (int, np.integer)) and 0 <= row < self.table.num_rows):
            raise QueryError(f"row must be an int in 0..{self.table.num_rows - 1}, got {row!r}")
        row = int(row)
        code = int(self.name_codes[row])
        info: dict[str, Any] = {
            "row": row,
            "name": self.names[code] if code >= 0 else "",
            "start": int(self.start[row]),
            "duration": int(self.end[row] - self.start[row]),
            "self": int(self.self_ns[row]),
        }
        for column in ("depth", "args", "input_shapes", "input_dtypes", "thread_name"):
            if column in self.table.column_names:
                value = self.table.column(column)[row].as_py()
                if value is not None and value != []:
                    info[column] = value
        return info

    def search(self, text: str) -> dict[str, Any]:
        """The names containing ``text`` (case-insensitive): ``ids`` (at most
        ``MAX_SEARCH_NAMES``), ``names`` (how many names matched) and ``matches`` (how many
        ranges have one of the names in ``ids``)."""
        if not isinstance(text, str):
            raise QueryError(f"search text must be a str, got {type(text).__name__}")
        needle = text.casefold()
        found = [i for i, name in enumerate(self.names) if needle in name.casefold()]
        if not needle:
            found = []
        ids = found[:MAX_SEARCH_NAMES]
        return {"ids": ids, "names": len(found), "matches": self.matches(ids)}

    def longest(self, name_id: int) -> dict[str, Any]:
        """The longest range named ``name_id``: ``row``, ``lane``, ``depth``, ``start``, ``end``
        (what a click on a summary row zooms to); QueryError for a name with no range."""
        if not (isinstance(name_id, (int, np.integer)) and 0 <= name_id < len(self.names)):
            raise QueryError(f"name must be an id in 0..{len(self.names) - 1}, got {name_id!r}")
        mine = np.flatnonzero(self.name_codes[self._rows] == int(name_id))
        if mine.size == 0:
            raise QueryError(f"no range is named {self.names[int(name_id)]!r}")
        best = int(mine[np.argmax(self._dur[mine])])
        return {
            "row": int(self._rows[best]),
            "lane": int(self._lane[best]),
            "depth": int(self._depth[best]),
            "start": int(self._s[best]),
            "end": int(self._e[best]),
        }

    def name_ids(self, name: str) -> list[int]:
        """The id of the name equal to ``name`` (a one-element list), or an empty list."""
        return [i for i, value in enumerate(self.names) if value == name][:1]

    def call_tree(self, max_nodes: int = MAX_TREE_NODES) -> dict[str, Any]:
        """The ranges aggregated by name path (threads merged): per node its ``parent`` (node
        index, -1 for roots), ``name`` id, ``total``/``self`` ns and ``count``, largest first
        and cut to ``max_nodes`` (children never outlive their parent in the cut)."""
        rows = np.flatnonzero(self.is_range)
        n = self.is_range.size
        path = np.full(n, -1, dtype=np.int64)
        parent_of = self.parent
        has_range_parent = np.zeros(n, dtype=bool)
        valid = parent_of >= 0
        has_range_parent[valid] = self.is_range[parent_of[valid]]
        level_rows = rows[~has_range_parent[rows]]
        node_parent: list[np.ndarray] = []
        node_name: list[np.ndarray] = []
        nodes = 0
        pending = rows[has_range_parent[rows]]
        while level_rows.size:
            above = np.where(has_range_parent[level_rows], path[parent_of[level_rows]], -1)
            width = len(self.names) + 1
            key = (above + 1) * width + self.name_codes[level_rows] + 1
            unique, inverse = np.unique(key, return_inverse=True)
            path[level_rows] = nodes + np.asarray(inverse).reshape(-1)
            node_parent.append(unique // width - 1)
            node_name.append(unique % width - 1)
            nodes += len(unique)
            ready = path[parent_of[pending]] >= 0
            level_rows, pending = pending[ready], pending[~ready]
        parents = np.concatenate(node_parent) if node_parent else np.empty(0, dtype=np.int64)
        names = np.concatenate(node_name) if node_name else np.empty(0, dtype=np.int64)
        duration = (self.end - self.start)[rows].astype(np.float64)
        total = np.bincount(path[rows], weights=duration, minlength=nodes)
        own = np.bincount(
            path[rows], weights=self.self_ns[rows].astype(np.float64), minlength=nodes
        )
        count = np.bincount(path[rows], minlength=nodes)
        # Largest first; a parent's total is at least its child's, ties keep the parent first
        # (parents get lower node numbers), so the first max_nodes form a closed subtree.
        order = np.lexsort((np.arange(nodes), -total))[:max_nodes]
        kept = np.full(nodes, -1, dtype=np.int64)
        kept[order] = np.arange(order.size)
        while True:  # drop nodes whose parent fell out (an async child can outlast it)
            closed = (parents[order] < 0) | (kept[np.maximum(parents[order], 0)] >= 0)
            if closed.all():
                break
            order = order[closed]
            kept[:] = -1
            kept[order] = np.arange(order.size)
        used = np.unique(names[order])
        return {
            "parent": np.where(
                parents[order] >= 0, kept[np.maximum(parents[order], 0)], -1
            ).tolist(),
            "name": names[order].tolist(),
            "total": total[order].astype(np.int64).tolist(),
            "self": own[order].astype(np.int64).tolist(),
            "count": count[order].tolist(),
            "nodes": int(nodes),
            **self.names_of(used.tolist()),
        }


def response_json(payload: Any) -> str:
    """``payload`` as compact JSON (what a comm message or the HTML embed carries)."""
    import json

    return json.dumps(payload, separators=(",", ":"))


def response_size(payload: Any) -> int:
    """Bytes of ``payload`` as compact JSON (`response_json`)."""
    return len(response_json(payload))


def first_view(index: TimelineIndex, width_px: int = 1200) -> dict[str, Any]:
    """The whole trace at ``width_px``: the widget's initial state and the HTML fallback's."""
    return index.query(0.0, float(index.span_ns), width_px)
