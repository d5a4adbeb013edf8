"""A recfn event table to Chrome trace events; see `chrome.write_chrome_trace`."""

from __future__ import annotations

import json
import operator
from collections.abc import Iterator
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from recfn.formats.chrome._reader import NO_DEVICE
from recfn.formats.chrome._times import micros
from recfn.formats.columns import equals, ints, nulls
from recfn.formats.schema import MARK, MEMORY, RANGE

TORCH_ARGS = (("sequence_nr", "Sequence number", -1), ("fwd_thread_id", "Fwd thread id", 0))
"""Integer columns written under torch's args keys (unless unset), which the reader maps back."""
LIST_ARGS = (
    ("input_shapes", "Input Dims"),
    ("input_dtypes", "Input type"),
    ("stack", "stack"),
    ("flops", "flops"),
)
"""Optional columns written into args (the reader maps the first two back, as torch names them)."""


ROWS = 50_000
"""Rows encoded at a time when writing: the JSON of a large trace is never whole in memory."""


class Rows:
    """An event table, DataFrame or ``pyarrow.Table``, read as DataFrames of `ROWS` rows."""

    def __init__(self, data: pd.DataFrame | pa.Table) -> None:
        self.data = data
        self.columns = list(data.column_names if isinstance(data, pa.Table) else data.columns)
        self.count = data.num_rows if isinstance(data, pa.Table) else len(data)

    def frames(self, columns: list[str] | None = None) -> Iterator[tuple[int, pd.DataFrame]]:
        """(first row, frame) of consecutive rows, with only `columns` (default all)."""
        keep = [c for c in (columns or self.columns) if c in self.columns]
        for first in range(0, self.count, ROWS):
            yield first, self.take(slice(first, first + ROWS), keep)

    def take(self, rows: slice | np.ndarray, columns: list[str] | None = None) -> pd.DataFrame:
        """The rows at `rows` (a slice or positions) as a DataFrame."""
        data = self.data
        if isinstance(data, pa.Table):
            data = data.select(columns) if columns is not None else data
            part = (
                data.slice(rows.start, rows.stop - rows.start)
                if isinstance(rows, slice)
                else data.take(pa.array(rows))
            )
            # Nullable int64 as Int64, not float64, which would round epoch nanoseconds.
            return part.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
        frame = data[columns] if columns is not None else data
        return frame.iloc[rows]

    def start_ns(self) -> int:
        """The first start, 0 for no rows."""
        if isinstance(self.data, pa.Table):
            first = pc.min(self.data["start_ns"]).as_py()
            return int(first) if first is not None else 0
        start = ints(self.data["start_ns"], 0)
        return int(start.min()) if len(start) else 0


def header_events(rows: Rows) -> list[dict[str, Any]]:
    """Process and thread metadata of the whole table (first rows of each process/thread)."""
    process_keys = ["pid", "host", "rank"]
    thread_keys = ["pid", "thread_id", "thread_name"]
    processes, threads = [], []
    for _, frame in rows.frames([*process_keys, "thread_id", "thread_name"]):
        if "pid" in frame.columns:
            processes.append(frame[[c for c in process_keys if c in frame]].drop_duplicates("pid"))
        if "thread_name" in frame.columns:
            keys = [c for c in thread_keys if c in frame]
            threads.append(frame[keys].dropna().drop_duplicates(keys[:-1]))
    return _process_metadata(_stacked(processes)) + _thread_metadata(_stacked(threads))


def _stacked(frames: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def ranks(rows: Rows) -> pd.DataFrame:
    """The distinct ranks (a ``rank`` column) of the table, for `distributed_info`."""
    if "rank" not in rows.columns:
        return pd.DataFrame()
    found = [pd.unique(ints(frame["rank"], -1)) for _, frame in rows.frames(["rank"])]
    return pd.DataFrame({"rank": np.unique(np.concatenate(found)) if found else []})


Totals = tuple[np.ndarray, list[str], np.ndarray]
"""Memory rows (positions), their series keys and running totals, in row order."""


def memory_totals(rows: Rows) -> Totals:
    """Running totals of the table's memory rows (`_running_totals`)."""
    needed = ["kind", "pid", "name", "device", "memory_bytes", "start_ns"]
    if "memory_bytes" not in rows.columns:
        return np.zeros(0, dtype=np.int64), [], np.zeros(0, dtype=np.int64)
    parts, where = [], []
    for first, frame in rows.frames(needed):
        memory = np.flatnonzero(equals(frame["kind"], MEMORY))
        if memory.size:
            parts.append(frame.iloc[memory])
            where.append(first + memory)
    if not parts:
        return np.zeros(0, dtype=np.int64), [], np.zeros(0, dtype=np.int64)
    positions = np.concatenate(where)
    found = _running_totals(pd.concat(parts, ignore_index=True))
    order = [i for i, _, _ in found]
    return (
        positions[order],
        [key for _, key, _ in found],
        np.array([total for _, _, total in found], dtype=np.int64),
    )


def trace_events(
    df: pd.DataFrame, base_ns: int, totals: Totals | None = None
) -> list[dict[str, Any]]:
    """One event per row: "X" for ranges ("B" while still open), "i" for marks, "C" for memory
    events (`totals` of the rows of `df`; by default computed from `df` alone). ``ts``/``dur``
    are microseconds after `base_ns`. Each row's ``id`` and ``parent_id`` go into the event's
    ``recfn_id``/``recfn_parent_id``, so that recfn reads back the parents of ranges that
    overlap on one thread (asyncio tasks), which nesting alone cannot tell."""
    n = len(df)
    start = ints(df["start_ns"], 0)
    ts = micros(start - base_ns)
    dur = micros(np.maximum(ints(df["end_ns"], 0) - start, 0))
    name = _strings(df["name"])
    cat = _strings(df["scope"]) if "scope" in df.columns else [""] * n
    pid = ints(df["pid"], 0).tolist() if "pid" in df.columns else [0] * n
    tid = ints(df["thread_id"], 0).tolist()
    args = _event_args(df)
    links = _links(df)

    ranges = equals(df["kind"], RANGE)
    open_range = nulls(df["end_ns"])
    events = [
        {
            "ph": "X",
            "cat": cat[i],
            "name": name[i],
            "pid": pid[i],
            "tid": tid[i],
            "ts": ts[i],
            "dur": dur[i],
            "args": args[i],
            **links[i],
        }
        for i in np.flatnonzero(ranges & ~open_range).tolist()
    ]
    events += [
        {
            "ph": "B",
            "cat": cat[i],
            "name": name[i],
            "pid": pid[i],
            "tid": tid[i],
            "ts": ts[i],
            "args": args[i],
            **links[i],
        }
        for i in np.flatnonzero(ranges & open_range).tolist()
    ]
    events += [
        {
            "ph": "i",
            "s": "t",
            "cat": cat[i],
            "name": name[i],
            "pid": pid[i],
            "tid": tid[i],
            "ts": ts[i],
            "args": args[i],
            **links[i],
        }
        for i in np.flatnonzero(equals(df["kind"], MARK)).tolist()
    ]
    if totals is None:
        found = _running_totals(df)
        totals = (
            np.array([i for i, _, _ in found], dtype=np.int64),
            [key for _, key, _ in found],
            np.array([total for _, _, total in found], dtype=np.int64),
        )
    for i, key, total in zip(totals[0].tolist(), totals[1], totals[2].tolist()):
        events.append(
            {
                "ph": "C",
                "cat": cat[i],
                "name": name[i],
                "pid": pid[i],
                "tid": tid[i],
                "ts": ts[i],
                "args": {key: total},
                **links[i],
            }
        )
    return events


def _links(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Per row: ``recfn_id`` and ``recfn_parent_id`` (null for roots); nothing without an
    ``id`` column."""
    if "id" not in df.columns:
        return [{}] * len(df)
    ids = ints(df["id"], 0).tolist()
    if "parent_id" not in df.columns:
        return [{"recfn_id": i} for i in ids]
    has_parent = ~nulls(df["parent_id"])
    parents = [p if has else None for p, has in zip(ints(df["parent_id"], 0).tolist(), has_parent)]
    return [{"recfn_id": i, "recfn_parent_id": p} for i, p in zip(ids, parents)]


def _strings(series: pd.Series) -> list[str]:
    return [str(v) for v in series.astype(object).where(series.notna(), "").tolist()]


def _event_args(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Per row: the ``args`` column (a JSON object is merged, other text kept under "args"),
    the `TORCH_ARGS` and `LIST_ARGS` columns."""
    args: list[dict[str, Any]] = [{} for _ in range(len(df))]
    if "args" in df.columns:
        texts = df["args"].to_numpy(dtype=object)
        present = np.flatnonzero(df["args"].notna().to_numpy()).tolist()
        for i, value in zip(present, _decode_many([str(texts[i]) for i in present])):
            args[i] = value
    for column, key, unset in TORCH_ARGS:
        if column in df.columns:
            values = ints(df[column], unset)
            for i in np.flatnonzero(values != unset).tolist():
                args[i][key] = int(values[i])
    for column, key in LIST_ARGS:
        if column in df.columns:
            values = df[column].to_numpy(dtype=object)
            for i in np.flatnonzero(df[column].notna().to_numpy()).tolist():
                args[i][key] = _plain(values[i])
    return args


def _decode_many(texts: list[str]) -> list[dict[str, Any]]:
    """`_decode_args` of each text; one decode of them all when each is one JSON object.

    The texts are joined into one JSON list, first split into raw values: when there are as
    many as texts and each is as long as its text, value k is text k (none starts or ends
    with a space, so each value begins where its text does), and the list decodes to them.
    """
    if texts and all(t[:1] == "{" and t[-1:] == "}" for t in texts):
        blobs = [t.encode() for t in texts]
        joined = b"[" + b",".join(blobs) + b"]"
        try:
            raws = _RAWS.decode(joined)
            if len(raws) == len(blobs) and all(map(operator.eq, map(len, raws), map(len, blobs))):
                return _OBJECTS.decode(joined)
        except (ValueError, UnicodeDecodeError):  # msgspec's errors: the slower path says
            pass
    return [_decode_args(text) for text in texts]


_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_OBJECTS = msgspec.json.Decoder(list[dict[str, Any]])


def _decode_args(text: str) -> dict[str, Any]:
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            pass
        else:
            if isinstance(value, dict):
                return value
    return {"args": text}


def _plain(value: Any) -> Any:
    """numpy containers and scalars (as pyarrow's to_pandas gives them) as JSON-ready Python."""
    if isinstance(value, np.ndarray | list | tuple):
        return [_plain(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def _process_metadata(df: pd.DataFrame) -> list[dict[str, Any]]:
    """A "process_name" per process (its host, pid and rank) and, with ranks, a
    "process_sort_index" that orders the processes by rank."""
    if "pid" not in df.columns or ("host" not in df.columns and "rank" not in df.columns):
        return []
    keys = [c for c in ("pid", "host", "rank") if c in df.columns]
    processes = df[keys].drop_duplicates("pid")
    events: list[dict[str, Any]] = []
    for row in processes.to_dict("records"):
        pid = int(row["pid"])
        rank = int(row["rank"]) if pd.notna(row.get("rank")) else -1
        label = f"{row['host']} pid {pid}" if row.get("host") else f"pid {pid}"
        if rank >= 0:
            label = f"rank {rank} · {label}"
            events.append(
                {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": rank}}
            )
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": label}})
    return events


def distributed_info(df: pd.DataFrame, metadata: dict[str, str]) -> dict[str, Any]:
    """HTA's ``distributedInfo`` (``rank``, ``world_size``) for a table of one rank, else {}."""
    if "rank" not in df.columns or not len(df):
        return {}
    ranks = pd.unique(ints(df["rank"], -1))
    if len(ranks) != 1 or ranks[0] < 0:
        return {}
    info: dict[str, Any] = {"rank": int(ranks[0])}
    world = metadata.get("recfn.world_size", "")
    if world.lstrip("-").isdigit() and int(world) > 0:
        info["world_size"] = int(world)
    return info


def _thread_metadata(df: pd.DataFrame) -> list[dict[str, Any]]:
    if "thread_name" not in df.columns:
        return []
    keys = ["pid", "thread_id"] if "pid" in df.columns else ["thread_id"]
    threads = df[[*keys, "thread_name"]].dropna().drop_duplicates(keys)
    return [
        {
            "ph": "M",
            "name": "thread_name",
            "pid": int(row.get("pid", 0)),
            "tid": int(row["thread_id"]),
            "args": {"name": str(row["thread_name"])},
        }
        for row in threads.to_dict("records")
    ]


def _running_totals(df: pd.DataFrame) -> list[tuple[int, str, int]]:
    """(row, series key, running total) for memory events: a counter per (pid, name, device),
    keyed by the device (`NO_DEVICE` when none)."""
    rows = np.flatnonzero(equals(df["kind"], MEMORY))
    if rows.size == 0 or "memory_bytes" not in df.columns:
        return []
    device = (
        df["device"].astype(object).where(df["device"].notna(), NO_DEVICE).to_numpy()[rows]
        if "device" in df.columns
        else np.full(rows.size, NO_DEVICE, dtype=object)
    )
    series = pd.DataFrame(
        {
            "pid": ints(df["pid"], 0)[rows] if "pid" in df.columns else 0,
            "name": df["name"].astype(object).to_numpy()[rows],
            "device": device,
            "change": ints(df["memory_bytes"], 0)[rows],
        }
    )
    order = np.argsort(ints(df["start_ns"], 0)[rows], kind="stable")
    running = np.empty(rows.size, dtype=np.int64)
    running[order] = (
        series.iloc[order]
        .groupby(["pid", "name", "device"], sort=False, dropna=False)["change"]
        .cumsum()
    )
    return list(zip(rows.tolist(), device.tolist(), running.tolist()))
