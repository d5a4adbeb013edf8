"""Run sets: any number of runs of one workload, and their comparison (``recfn.compare``).

A run is one capture: a trace file, a dataset folder (``profile(output=...)``, ``recfn run -o
DIR/``: one folder per process), a ``recfn.Trace`` or an event DataFrame. A run set is

* a folder of runs: each trace file in it, and each folder in it, is one run (``recfn run
  --repeat N -o runs/`` writes ``runs/run-0001/``, ...); a folder that is itself a dataset
  (its folders are ``hostname=...`` or ``process=...``) is one run;
* a glob pattern: each match is one run;
* a list: each item is one run (a path, a Trace or a DataFrame);
* one trace file, Trace or DataFrame: one run.

Parquet runs are read out of core, only the columns the statistics need
(``recfn.analysis.outofcore.files.run_stats``); Chrome JSON runs and groupings without ``name``
are read into memory. The statistics are ``recfn.analysis.stats.compare``; docs/compare.md
explains them.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pandas as pd

from recfn.analysis.columns import group_keys
from recfn.analysis.stats.compare import (
    Comparison,
    check_options,
    check_step_options,
    compare_runs,
    find_steps,
)
from recfn.analysis.stats.runs import RunStats, frame_stats
from recfn.errors import (
    RecfnTypeError,
    RecfnValueError,
    RunSetError,
    TraceFormatError,
    TraceNotFoundError,
)
from recfn.formats.dataset import PROCESS_FOLDER, TRACE_SUFFIXES, Footers
from recfn.formats.schema import SCHEMA_VERSION, SCHEMA_VERSION_KEY
from recfn.formats.trace import Trace

HOST_FOLDER = "hostname="
"""Folders named so hold a dataset's processes on one host (``capture._stream.process_folder``)."""

RUN_FOLDER = "run-"
"""``recfn run --repeat`` and the pytest plugin name each run's folder ``run-0001``, ...."""

PATH_SEPARATOR = ";"
"""Joins the names of a call path (as collapsed stacks do; a ``;`` inside a name becomes ``:``)."""

MAX_PATH_EVENTS = 5_000_000
"""Runs with more events than this in all are not read into memory for a per-path comparison."""


@dataclass
class Run:
    """One run of a run set: its files, or a frame or trace in memory."""

    label: str
    files: tuple[str, ...] = ()
    frame: Optional[pd.DataFrame] = None
    trace: Optional[Trace] = None

    def schema_version(self, footers: Footers) -> Optional[str]:
        """The ``recfn.schema_version`` this run's data carries, None when it carries none."""
        if self.frame is not None:
            return _version_of(self.frame.attrs.get("recfn", {}))
        if self.trace is not None and not self.trace.files:
            return _version_of(self.trace.metadata)
        versions = {_file_version(name, footers) for name in self.files}
        versions.discard(None)
        if len(versions) > 1:
            raise RunSetError(
                f"{self.label}: its files carry different schema versions "
                f"{sorted(str(v) for v in versions)}"
            )
        return versions.pop() if versions else None

    def events_frame(self) -> pd.DataFrame:
        """The run's events in memory."""
        if self.frame is not None:
            return self.frame
        if self.trace is not None:
            return self.trace.to_pandas()
        from recfn.formats.trace import load

        frame: pd.DataFrame = load(
            list(self.files) if len(self.files) > 1 else self.files[0], as_pandas=True
        )
        return frame

    def events(self, footers: Footers) -> int:
        """How many events the run holds (from the Parquet footers when it has files)."""
        if self.frame is not None:
            return len(self.frame)
        if self.trace is not None and not self.trace.files:
            return self.trace.events
        files = self.files or (self.trace.files if self.trace is not None else ())
        total = 0
        for name in files:
            if name.lower().endswith((".parquet", ".pq")):
                total += int(footers(name).num_rows)
            else:
                total += os.path.getsize(name) // 100  # a Chrome event takes ~100 bytes
        return total

    def stats(self, keys: list[str], keep_calls: bool, footers: Footers) -> RunStats:
        files = self.files or (self.trace.files if self.trace is not None else ())
        out_of_core = (
            self.frame is None
            and (self.trace is None or self.trace.files)
            and "name" in keys
            and all(name.lower().endswith((".parquet", ".pq")) for name in files)
        )
        if out_of_core:
            from recfn.analysis.outofcore.files import run_stats

            found = run_stats(
                list(files), keys, label=self.label, keep_calls=keep_calls, footers=footers
            )
        else:
            frame = self.events_frame()
            missing = [key for key in keys if key not in frame.columns]
            if missing:
                raise RunSetError(f"{self.label}: no column(s) {missing} to group by")
            found = frame_stats(frame, keys, label=self.label, keep_calls=keep_calls)
        found.schema_version = self.schema_version(footers)
        return found


def _version_of(metadata: Any) -> Optional[str]:
    value = metadata.get(SCHEMA_VERSION_KEY) if hasattr(metadata, "get") else None
    return None if value is None else str(value)


def _file_version(name: str, footers: Footers) -> Optional[str]:
    if not name.lower().endswith((".parquet", ".pq")):
        return None  # Chrome JSON: read into the current schema
    raw = (footers.schema(name).metadata or {}).get(SCHEMA_VERSION_KEY.encode())
    return None if raw is None else raw.decode(errors="replace")


def read_runs(source: Any, side: str = "run set") -> list[Run]:
    """The runs of a run set (see the module's docstring). ``TraceNotFoundError`` naming
    `side` for a path that does not exist or a folder or pattern with no trace files;
    ``RecfnTypeError`` for anything that is not a run set."""
    if isinstance(source, (list, tuple)):
        if not source:
            raise RunSetError(f"{side}: an empty list of runs")
        return [_one_run(item, side, f"{side}[{i}]") for i, item in enumerate(source)]
    if isinstance(source, (Trace, pd.DataFrame)):
        return [_one_run(source, side, side)]
    try:
        name = os.fspath(source)
    except TypeError:
        raise RecfnTypeError(
            f"{side}: a run set is a folder, a glob pattern, a file, a list of runs, a "
            f"recfn.Trace or a DataFrame; got {type(source).__name__}"
        ) from None
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if os.path.isdir(name):
        if _is_dataset(name):
            return [Run(_label(name), files=tuple(_trace_files(name, side)))]
        runs = []
        for entry in sorted(os.listdir(name)):
            path = os.path.join(name, entry)
            if entry.startswith("."):
                continue
            if os.path.isdir(path):
                found = _trace_files(path, side, required=False)
                if found:
                    runs.append(Run(entry, files=tuple(found)))
            elif entry.lower().endswith(TRACE_SUFFIXES):
                runs.append(Run(entry, files=(path,)))
        if not runs:
            raise TraceNotFoundError(
                f"{side}: no trace files (.parquet, .json, .json.gz) in {name!r}"
            )
        return runs
    if os.path.exists(name):
        return [Run(os.path.basename(name), files=(name,))]
    if glob.has_magic(name):
        matches = sorted(glob.glob(name, recursive=True))
        runs = [_one_run(match, side, os.path.basename(match)) for match in matches]
        runs = [run for run in runs if run.files]
        if not runs:
            raise TraceNotFoundError(f"{side}: no trace files match {name!r}")
        return runs
    raise TraceNotFoundError(f"{side}: no such file or folder: {name!r}")


def parse_percent(text: str, what: str) -> float:
    """A share written ``5%`` or ``0.05``, as 0.05; ``RecfnValueError`` naming `what` for
    anything else (a bare number of 1 or more is taken for a forgotten ``%`` and refused)."""
    value = str(text).strip()
    try:
        number = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise RecfnValueError(
            f"{what} expects a percentage such as 5% (or 0.05), got {text!r}"
        ) from None
    if not value.endswith("%") and number >= 1:
        raise RecfnValueError(f"{what}: write {value}% for a percentage (or a fraction below 1)")
    if not 0 <= number < 1 or number != number:
        raise RecfnValueError(f"{what} must be at least 0% and below 100%, got {text!r}")
    return number


def next_run_folders(folder: str, count: int) -> list[str]:
    """``count`` new run folders in the run set `folder`: ``run-0001``, ... numbered on after
    the ``run-<k>`` entries already there."""
    taken = [
        int(entry[len(RUN_FOLDER) :])
        for entry in (os.listdir(folder) if os.path.isdir(folder) else [])
        if entry.startswith(RUN_FOLDER) and entry[len(RUN_FOLDER) :].isdigit()
    ]
    first = max(taken, default=0) + 1
    return [os.path.join(folder, f"{RUN_FOLDER}{k:04d}") for k in range(first, first + count)]


def _one_run(item: Any, side: str, label: str) -> Run:
    if isinstance(item, Run):
        return item
    if isinstance(item, Trace):
        return Run(item.name or label, trace=item)
    if isinstance(item, pd.DataFrame):
        cell = item.attrs.get("recfn", {}).get("cell") if isinstance(item.attrs, dict) else None
        return Run(str(cell or label), frame=item)
    try:
        name = os.fsdecode(os.fspath(item))
    except TypeError:
        raise RecfnTypeError(
            f"{label}: a run is a trace file, a dataset folder, a recfn.Trace or a DataFrame; "
            f"got {type(item).__name__}"
        ) from None
    if os.path.isdir(name):
        return Run(_label(name), files=tuple(_trace_files(name, side)))
    if os.path.exists(name):
        return Run(os.path.basename(name), files=(name,))
    raise TraceNotFoundError(f"{side}: no such file or folder: {name!r}")


def _is_dataset(folder: str) -> bool:
    """Whether `folder` is one dataset: its folders are hosts' or processes'."""
    entries = [e for e in os.listdir(folder) if os.path.isdir(os.path.join(folder, e))]
    return bool(entries) and all(e.startswith((HOST_FOLDER, PROCESS_FOLDER)) for e in entries)


def _trace_files(folder: str, side: str, required: bool = True) -> list[str]:
    found = sorted(
        os.path.join(root, name)
        for root, _, names in os.walk(folder)
        for name in names
        if name.lower().endswith(TRACE_SUFFIXES) and not name.startswith(".")
    )
    if not found and required:
        raise TraceNotFoundError(
            f"{side}: no trace files (.parquet, .json, .json.gz) in {folder!r}"
        )
    return found


def _label(source: Any) -> str:
    if isinstance(source, (list, tuple)):
        return f"{len(source)} runs"
    if isinstance(source, Trace):
        return source.name
    if isinstance(source, pd.DataFrame):
        return "frame"
    try:
        name = os.fsdecode(os.fspath(source))
    except TypeError:
        return type(source).__name__
    return os.path.basename(name.rstrip("/\\")) or name


def check_versions(sides: dict[str, list[RunStats]], runs: dict[str, list[Run]]) -> None:
    """``TraceFormatError`` for a run newer than this recfn reads; ``RunSetError`` when the runs
    carry different schema versions, naming the versions and a run of each."""
    seen: dict[str, tuple[str, str]] = {}
    for side, stats in sides.items():
        for run_stats, run in zip(stats, runs[side]):
            version = run_stats.schema_version
            if version is None:
                continue
            if version.isdigit() and int(version) > SCHEMA_VERSION:
                raise TraceFormatError(
                    f"{side}: {run.label}: trace schema version {version} is newer than this "
                    f"recfn supports ({SCHEMA_VERSION}); upgrade recfn"
                )
            seen.setdefault(version, (side, run.label))
    if len(seen) > 1:
        found = "; ".join(
            f"{where[0]} run {where[1]!r} has version {version}"
            for version, where in sorted(seen.items())
        )
        raise RunSetError(
            f"the runs have different schema versions ({SCHEMA_VERSION_KEY}): {found}"
        )


def read_stats(
    sources: Sequence[tuple[str, list[Run]]],
    keys: list[str],
    keep_calls: bool,
    threads: int,
) -> dict[str, list[RunStats]]:
    """Each side's runs' statistics, ``threads`` runs at a time."""
    footers = Footers()
    jobs = [(side, run) for side, runs in sources for run in runs]
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(jobs)))) as pool:
        found = list(pool.map(lambda job: job[1].stats(keys, keep_calls, footers), jobs))
    result: dict[str, list[RunStats]] = {side: [] for side, _ in sources}
    for (side, _), stats in zip(jobs, found):
        result[side].append(stats)
    return result


def _threads(threads: Optional[int]) -> int:
    """How many runs to read at once (``recfn.analysis.outofcore.files.worker_threads``:
    the cores, up to 4), loaded when first needed, as the out-of-core reader is."""
    from recfn.analysis.outofcore.files import worker_threads

    return worker_threads(threads)


def _keys(by: str | Sequence[str]) -> list[str]:
    return group_keys(by, "compare")


def compare(
    baseline: Any,
    candidate: Any,
    *,
    by: str | Sequence[str] = "name",
    confidence: float = 0.99,
    min_change: float = 0.01,
    resamples: int = 2000,
    seed: int = 0,
    min_runs: int = 3,
    min_calls: int = 5,
    labels: Optional[tuple[str, str]] = None,
    paths: bool = False,
    threads: Optional[int] = None,
) -> Comparison:
    """How `candidate` changed from `baseline`, two run sets of one workload, per group (a range
    name by default; `by` any column or columns): calls, the median and spread of time per run
    and per call on each side, the change beyond the common shift with its interval, a verdict
    (slower / faster / unchanged / not enough data) and the share of the workload. Intervals
    come from the bootstrap over runs when both sides have two runs or more, else over calls.
    `paths` also compares per call path, for the differential flame view. ``threads`` runs are
    read at once (default: the cores, up to 4). docs/compare.md explains the method and its
    options.

    Errors: ``TraceNotFoundError`` for a missing path or a folder with no traces;
    ``TraceFormatError`` for a file that is not a trace; ``RunSetError`` for run sets that
    share no group, carry different schema versions, or a side with no ranges;
    ``RecfnTypeError`` or ``RecfnValueError`` for an option of the wrong type or out of range
    (``threads`` below 1, ``confidence`` outside [0.5, 1)...), before any run is read."""
    keys = _keys(by)
    threads = _threads(threads)
    check_options(confidence, min_change, resamples, seed, min_runs, min_calls)
    names = labels or (_label(baseline), _label(candidate))
    if len(names) != 2:
        raise RunSetError(f"labels must be two names, got {labels!r}")
    base_runs = read_runs(baseline, "baseline")
    cand_runs = read_runs(candidate, "candidate")
    keep_calls = len(base_runs) < 2 or len(cand_runs) < 2
    stats = read_stats(
        [("baseline", base_runs), ("candidate", cand_runs)], keys, keep_calls, threads
    )
    check_versions(stats, {"baseline": base_runs, "candidate": cand_runs})
    options: dict[str, Any] = dict(
        confidence=confidence,
        min_change=min_change,
        resamples=resamples,
        seed=seed,
        min_runs=min_runs,
        min_calls=min_calls,
    )
    result = compare_runs(
        stats["baseline"], stats["candidate"], labels=(str(names[0]), str(names[1])), **options
    )
    result.sources = (base_runs, cand_runs)
    result.options = options
    if paths:
        result.paths = compare_paths(base_runs, cand_runs, result.labels, **options)
    return result


def compare_paths(
    baseline: list[Run], candidate: list[Run], labels: tuple[str, str], **options: Any
) -> Comparison:
    """The comparison per call path (group ``path``: names from the root joined by ``;``), the
    runs read into memory; ``RunSetError`` when they hold more than `MAX_PATH_EVENTS` events."""
    footers = Footers()
    events = sum(run.events(footers) for run in (*baseline, *candidate))
    if events > MAX_PATH_EVENTS:
        raise RunSetError(
            f"a per-path comparison reads every run into memory: {events:,} events is more "
            f"than {MAX_PATH_EVENTS:,}"
        )
    keep_calls = len(baseline) < 2 or len(candidate) < 2
    sides = [
        [frame_stats(with_paths(run.events_frame()), "path", label=run.label, keep_calls=keep_calls)
         for run in runs]
        for runs in (baseline, candidate)
    ]  # fmt: skip
    return compare_runs(sides[0], sides[1], labels=labels, **options)


def with_paths(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with a ``path`` column: each closed range's call path (names from its root
    joined by `PATH_SEPARATOR`), None for other rows."""
    from recfn.analysis.stats.tree import call_tree

    tree = call_tree(frame)
    names = [str(n).replace(PATH_SEPARATOR, ":") for n in tree.names]
    paths: list[str] = []
    for parent, code in zip(tree.parent.tolist(), tree.name.tolist()):
        name = names[code] if code >= 0 else ""
        paths.append(f"{paths[parent]}{PATH_SEPARATOR}{name}" if parent >= 0 else name)
    lookup = np.array([*paths, None], dtype=object)
    return frame.assign(path=lookup[tree.row_path])  # row_path -1 takes the None


def compare_steps(
    run_sets: Sequence[Any],
    *,
    by: str | Sequence[str] = "name",
    labels: Optional[Sequence[str]] = None,
    threads: Optional[int] = None,
    **options: Any,
) -> pd.DataFrame:
    """Run sets in order (one per commit, say): per group, the first set at which its time
    changed from the set before it, as asv reports steps; see
    ``recfn.analysis.stats.compare.find_steps`` for the columns. Options as `compare`."""
    if isinstance(run_sets, (str, bytes, os.PathLike)) or not isinstance(run_sets, Sequence):
        raise RecfnTypeError(
            f"finding steps needs a list of run sets in order (one per commit, say), "
            f"got {type(run_sets).__name__}"
        )
    keys = _keys(by)
    threads = _threads(threads)
    check_step_options(options)
    if len(run_sets) < 2:
        raise RunSetError("finding steps needs at least two run sets")
    names = list(labels) if labels is not None else [_label(s) for s in run_sets]
    runs = [read_runs(source, f"run set {name!r}") for source, name in zip(run_sets, names)]
    keep_calls = any(len(r) < 2 for r in runs)
    sides = [(str(i), r) for i, r in enumerate(runs)]
    stats = read_stats(sides, keys, keep_calls, threads)
    check_versions(stats, dict(sides))
    return find_steps([stats[str(i)] for i in range(len(runs))], names, **options)
