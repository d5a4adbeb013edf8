"""Summaries of datasets that need not fit in memory, computed by DuckDB over the Parquet files.

The numbers are the in-memory summary's (``summary.summarize``, by name): self time is the
duration minus the union of the direct children's intervals, clipped to the parent, found by
joining each closed range to its parent within its own process (``host``, ``pid``: ids are
unique per process) and sweeping the children in start order, as the pandas path does.
DuckDB streams the files and spills to disk past its memory limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from .summary import PROFILER_SPAN_SCOPES, finish_summary

TEXT_KEYS = ("name", "host", "thread_name", "scope", "kind", "device")
"""Dictionary columns, grouped by their text."""
MEMORY_LIMIT = "1GB"
"""DuckDB's memory limit for a summary; past it DuckDB spills to temporary files."""


def available() -> bool:
    """Whether DuckDB is installed (``pip install recfn[fleet]``)."""
    try:
        import duckdb  # noqa: F401
    except ImportError:
        return False
    return True


def interactive() -> bool:
    """Whether progress may be shown: standard error is a terminal and not under CI."""
    import os
    import sys

    return bool(sys.stderr.isatty()) and not os.environ.get("CI")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _columns(connection: Any, source: str) -> set[str]:
    rows = connection.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
    return {str(row[0]) for row in rows}


def supports(files: Sequence[str], options: dict[str, Any]) -> bool:
    """Whether ``summarize_files`` can compute the summary with these ``summary()`` options."""
    by = options.get("by", "name")
    keys = [by] if isinstance(by, str) else list(by)
    return (
        available()
        and "name" in keys
        and set(options) <= {"by", "sort_by", "top", "as_index"}
        and all(f.lower().endswith((".parquet", ".pq")) for f in files)
    )


def summarize_files(
    files: Sequence[str],
    by: str | Sequence[str] = "name",
    *,
    sort_by: str = "total_ns",
    top: int | None = None,
    as_index: bool = True,
    threads: int | None = None,
) -> pd.DataFrame:
    """The summary of the events in Parquet ``files`` per group, as ``df.recfn.summary``.

    ``by`` must include ``name``; as in memory, a range nested in a range of its own group
    (recursion) counts in the count, mean, min and max but not again in the total; other keys
    may be any columns (``rank``, ``host``, ``pid``...). ``flops`` is summed when the
    files have it; the memory columns are left out. ``attrs["self_total_ns"]`` holds the time
    the percentages divide by, ``attrs["events"]`` the number of closed ranges. ValueError for other groupings and for
    options that only the in-memory summary offers.
    """
    import duckdb

    keys = [by] if isinstance(by, str) else list(by)
    if "name" not in keys:
        raise ValueError("the out-of-core summary groups by name (plus any other columns)")
    if top is not None and top < 0:
        raise ValueError(f"top must be >= 0, got {top}")
    connection = duckdb.connect()
    try:
        connection.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        connection.execute(f"SET enable_progress_bar = {str(interactive()).lower()}")
        if threads is not None:
            connection.execute(f"SET threads = {int(threads)}")
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        source = f"read_parquet([{listed}], union_by_name = true, hive_partitioning = false)"
        present = _columns(connection, source)
        missing = [k for k in keys if k not in present]
        if missing:
            raise ValueError(f"the files have no column(s) {missing}")
        host = "coalesce(CAST(host AS VARCHAR), '')" if "host" in present else "''"
        pid = "coalesce(pid, 0)" if "pid" in present else "0"
        key_select = ", ".join(
            f"CAST({_quote(k)} AS VARCHAR) AS {_quote(k)}" if k in TEXT_KEYS else _quote(k)
            for k in keys
        )
        flops = "flops" in present
        spans = ", ".join("'" + s + "'" for s in PROFILER_SPAN_SCOPES)
        group = ", ".join(_quote(k) for k in keys)
        carried = ", ".join(f"{_quote(k)} AS g{i}_" for i, k in enumerate(keys))
        walked = ", ".join(f"w.g{i}_" for i in range(len(keys)))
        same_group = " AND ".join(
            f"a.{_quote(k)} IS NOT DISTINCT FROM w.g{i}_" for i, k in enumerate(keys)
        )
        query = f"""
            WITH RECURSIVE events AS (
                SELECT {host} AS h_, {pid} AS p_, id AS id_, parent_id AS up_,
                       start_ns AS s_, end_ns AS e_, CAST(scope AS VARCHAR) IN ({spans}) AS span_,
                       CAST(kind AS VARCHAR) = 'range' AND end_ns IS NOT NULL AS closed_
                       {", flops AS f_" if flops else ""}, {key_select}
                FROM {source}
            ),
            ranges AS (SELECT * FROM events WHERE closed_),
            walk AS (  -- up each range's ancestors until one is of its own group
                SELECT h_, p_, id_, up_ AS at_, false AS hit_, {carried}
                FROM ranges WHERE up_ IS NOT NULL
                UNION ALL
                SELECT w.h_, w.p_, w.id_, a.up_, a.closed_ AND {same_group}, {walked}
                FROM walk w JOIN events a ON a.id_ = w.at_ AND a.p_ = w.p_ AND a.h_ = w.h_
                WHERE NOT w.hit_ AND w.at_ IS NOT NULL
            ),
            nested AS (SELECT DISTINCT h_, p_, id_ FROM walk WHERE hit_),
            children AS (
                SELECT c.h_, c.p_, c.up_,
                       greatest(c.s_, p.s_) AS lo_,
                       greatest(least(c.e_, p.e_), greatest(c.s_, p.s_)) AS hi_
                FROM ranges c JOIN ranges p
                  ON c.up_ = p.id_ AND c.p_ = p.p_ AND c.h_ = p.h_
            ),
            swept AS (
                SELECT h_, p_, up_, lo_, hi_,
                       max(hi_) OVER (PARTITION BY h_, p_, up_ ORDER BY lo_
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach_
                FROM children
            ),
            covered AS (
                SELECT h_, p_, up_,
                       sum(greatest(hi_ - greatest(lo_, coalesce(reach_, lo_)), 0)) AS covered_
                FROM swept GROUP BY h_, p_, up_
            ),
            own AS (
                SELECT r.*, (r.e_ - r.s_) - coalesce(c.covered_, 0) AS self_,
                       CASE WHEN n.id_ IS NULL THEN r.e_ - r.s_ ELSE 0 END AS counted_
                FROM ranges r LEFT JOIN covered c
                  ON r.id_ = c.up_ AND r.p_ = c.p_ AND r.h_ = c.h_
                LEFT JOIN nested n ON r.id_ = n.id_ AND r.p_ = n.p_ AND r.h_ = n.h_
            )
            SELECT {group},
                   count(*)::BIGINT AS count,
                   sum(counted_)::BIGINT AS total_ns,
                   sum(self_)::BIGINT AS self_ns,
                   (sum(e_ - s_) / count(*))::DOUBLE AS mean_ns,
                   min(e_ - s_)::BIGINT AS min_ns,
                   max(e_ - s_)::BIGINT AS max_ns,
                   sum(CASE WHEN span_ THEN 0 ELSE self_ END)::BIGINT AS counted_self_
                   {", coalesce(sum(f_), 0)::BIGINT AS flops" if flops else ""}
            FROM own GROUP BY {group}
        """
        result = connection.execute(query).df()
    finally:
        connection.close()
    total = int(result.pop("counted_self_").sum()) if len(result) else 0
    ranges = int(result["count"].sum()) if len(result) else 0
    extra = ["flops"] if flops else []
    result = finish_summary(result, keys, extra, total, sort_by, top, as_index)
    result.attrs["events"] = ranges  # closed ranges summarised
    return result
