"""Clock offsets between hosts: every host stamps events with its own wall clock, so a fleet's
timelines line up only as well as its clocks agree. An offset per host (ns, added to its
``start_ns``, ``end_ns`` and ``device_start_ns``) corrects that; it is given by the user or
estimated from marks every process records at the same moment (``recfn.mark("sync")`` right
after a barrier).

Estimation: in each process the marks of that name are numbered in start order; the reference
host (the one holding the lowest ``rank``, else the first host name) sets the time of each
occurrence (the median over its processes); a host's offset is the median, over its processes'
occurrences that the reference also has, of the reference time minus its own. Durations do not
change, so summaries do not depend on offsets; timelines, windows and stragglers do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from recfn.errors import RecfnTypeError, RecfnValueError

if TYPE_CHECKING:
    import pyarrow as pa

ClockOffsets = Union[Mapping[str, int], str]
"""What ``recfn.load(..., clock_offsets=...)`` takes: ``{host: ns}``, or a mark's name."""

TIME_COLUMNS = ("start_ns", "end_ns", "device_start_ns")


def _hosts(table: pa.Table) -> tuple[np.ndarray, list[str]]:
    """Each row's host as a code, and the host names by code (``""`` without a host column)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "host" not in table.column_names:
        return np.zeros(table.num_rows, dtype=np.int64), [""]
    values = table.column("host").cast(pa.string()).fill_null("").combine_chunks()
    encoded = pc.dictionary_encode(values)
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, [str(h) for h in encoded.dictionary.to_pylist()]


def estimate_clock_offsets(source: Any, mark: str = "sync") -> dict[str, int]:
    """``{host: ns}`` that aligns every host's ``mark`` marks with the reference host's (0 for
    it); see the module docstring. ``source`` is a ``recfn.Trace`` or an event table.
    ValueError when no mark has that name or a host has none that the reference also has."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not isinstance(mark, str) or not mark:
        raise RecfnTypeError(f"mark must be a non-empty str, got {mark!r}")
    table = source if isinstance(source, pa.Table) else getattr(source, "table", None)
    if not isinstance(table, pa.Table):
        raise RecfnTypeError(
            f"expected a recfn.Trace or a pyarrow.Table, got {type(source).__name__}"
        )
    codes, hosts = _hosts(table)
    chosen = pc.and_(
        pc.equal(table.column("kind").cast(pa.string()), "mark"),
        pc.equal(table.column("name").cast(pa.string()), mark),
    )
    rows = np.flatnonzero(chosen.fill_null(False).to_numpy(zero_copy_only=False))
    if not rows.size:
        raise RecfnValueError(f"no mark named {mark!r} to align the hosts' clocks on")
    host = codes[rows]
    pid = table.column("pid").to_numpy()[rows]
    start = table.column("start_ns").to_numpy()[rows]
    order = np.lexsort((start, pid, host))
    host, pid, start = host[order], pid[order], start[order]
    new_process = np.ones(len(host), dtype=bool)
    new_process[1:] = (host[1:] != host[:-1]) | (pid[1:] != pid[:-1])
    first = np.maximum.accumulate(np.where(new_process, np.arange(len(host)), 0))
    occurrence = np.arange(len(host)) - first
    reference = _reference_host(table, codes, hosts, np.unique(host))
    mine = host == reference
    reference_times = {
        int(k): _median(start[mine & (occurrence == k)]) for k in np.unique(occurrence[mine])
    }
    offsets = {hosts[reference]: 0}
    for code in np.unique(codes):
        if code == reference:
            continue
        rows_of_host = np.flatnonzero((host == code) & np.isin(occurrence, list(reference_times)))
        if not rows_of_host.size:
            raise RecfnValueError(
                f"host {hosts[code]!r} has no {mark!r} mark matching those of the reference "
                f"host {hosts[reference]!r}: its clock cannot be aligned"
            )
        diffs = [reference_times[int(occurrence[r])] - int(start[r]) for r in rows_of_host]
        offsets[hosts[code]] = _median(diffs)
    return offsets


def _median(values: Any) -> int:
    """The median of integers, exact (ns since the epoch do not fit a float's mantissa)."""
    ordered = sorted(int(v) for v in values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) // 2


def _reference_host(table: pa.Table, codes: np.ndarray, hosts: list[str], present: Any) -> int:
    """The host holding the lowest rank (ranks >= 0), else the first host name with marks."""
    candidates = [int(c) for c in present]
    if "rank" in table.column_names:
        rank = table.column("rank").fill_null(-1).to_numpy()
        ranked = [(int(rank[codes == c][rank[codes == c] >= 0].min()), c) for c in candidates
                  if (rank[codes == c] >= 0).any()]  # fmt: skip
        if ranked:
            return min(ranked)[1]
    return min(candidates, key=lambda c: hosts[c])


def check_offsets(offsets: Any) -> dict[str, int]:
    """``offsets`` as ``{host: ns}``; TypeError for anything else."""
    if not isinstance(offsets, Mapping):
        raise RecfnTypeError(
            f"clock_offsets must be a {{host: ns}} mapping or a mark name, got "
            f"{type(offsets).__name__}"
        )
    out = {}
    for host, value in offsets.items():
        if not isinstance(host, str) or isinstance(value, bool) or not isinstance(value, int):
            raise RecfnTypeError(
                f"clock_offsets must map host names (str) to ns (int), got {host!r}: {value!r}"
            )
        out[host] = value
    return out


def apply_clock_offsets(table: pa.Table, offsets: ClockOffsets) -> pa.Table:
    """``table`` with each host's offset added to its time columns (a str: the offsets
    estimated from marks of that name) and ``recfn.clock_offsets`` in its metadata, listing
    every host. ValueError for a host the table does not have."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from recfn.formats.schema import CLOCK_OFFSETS_KEY, build_metadata, metadata_of

    if not isinstance(table, pa.Table):
        raise RecfnTypeError(
            f"apply_clock_offsets expects a pyarrow.Table (a Trace's .table), "
            f"got {type(table).__name__}"
        )
    chosen = estimate_clock_offsets(table, offsets) if isinstance(offsets, str) else offsets
    given = check_offsets(chosen)
    codes, hosts = _hosts(table)
    unknown = sorted(set(given) - set(hosts))
    if unknown:
        raise RecfnValueError(
            f"clock_offsets names hosts the trace does not have: {unknown}; its hosts: {hosts}"
        )
    per_host = np.array([given.get(h, 0) for h in hosts], dtype=np.int64)
    shift = pa.array(per_host[codes] if len(codes) else np.empty(0, np.int64))
    for name in TIME_COLUMNS:
        if name in table.column_names:
            index = table.schema.get_field_index(name)
            table = table.set_column(index, name, pc.add(table.column(name), shift))
    applied = {host: int(per_host[i]) for i, host in enumerate(hosts)}
    metadata = metadata_of(table)
    metadata[CLOCK_OFFSETS_KEY] = build_metadata(config={}, clock_offsets=applied)[
        CLOCK_OFFSETS_KEY
    ]
    return table.replace_schema_metadata(metadata)
