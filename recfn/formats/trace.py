"""``Trace``: one finished capture (a profile, a cell, a script, a loaded file), and ``load`` /
``merge``, the one loader and the one merge.

A trace holds the event table and what the table alone does not say (its name, the exception
that interrupted the capture). Its facts (dropped events, config, wall time, host, pid) come
from the table's metadata. The DataFrame and summaries are computed on first use and cached, so
showing a trace twice costs nothing. Rich reprs come from the layers above through
``recfn.formats.hooks``; without them a trace shows as a plain header line.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Optional, Union

from recfn.errors import RecfnTypeError, RecfnValueError
from recfn.formats import hooks as _hooks

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from matplotlib.axes import Axes

    from recfn.formats.dataset import Footers


class Trace:
    """A finished capture: ``.table`` (``pyarrow.Table``), ``.to_pandas()`` (with ``df.recfn``),
    ``.summary()``, ``.timeline()``, ``.diff()``, ``.compare()``, ``.save(path)``, and its facts.

    In a notebook it shows as a header line plus the top of its summary as HTML; in a terminal
    as text.
    """

    def __init__(
        self,
        table: Optional[pa.Table],
        *,
        name: str = "trace",
        wall_ns: Optional[int] = None,
        error: Optional[str] = None,
        execution_count: Optional[int] = None,
        cells: tuple[str, ...] = (),
    ) -> None:
        if table is not None:
            import pyarrow as pa

            if not isinstance(table, pa.Table):
                raise RecfnTypeError(f"Trace needs a pyarrow.Table, got {type(table).__name__}")
        self._table = table
        self._files: tuple[str, ...] = ()
        self._clock_offsets: Any = None  # applied when the files are read
        self.name = name
        self._wall_ns = wall_ns
        self._error = error
        self.execution_count = execution_count
        self.cells = cells or (name,)
        self._df: Optional[pd.DataFrame] = None
        self._metadata: Optional[dict[str, str]] = None
        self._footers: Optional[Footers] = None
        self._threads: Optional[int] = None
        self._summaries: dict[Any, pd.DataFrame] = {}
        self._dropped: Optional[int] = None  # stands for the files' count (from_files)
        self._one_file = False  # a file loaded lazily: .table reads it as load reads one file

    @classmethod
    def from_files(
        cls,
        files: Sequence[str],
        *,
        name: str = "trace",
        wall_ns: Optional[int] = None,
        error: Optional[str] = None,
        dropped_events: Optional[int] = None,
    ) -> Trace:
        """A trace of many files (a dataset), read only when ``.table`` is first used; its
        ``summary()`` runs over the files out of core, one process at a time. ``error`` and
        ``dropped_events``, when given, stand for what the files say (a capture whose last
        part could not be written knows more than its files)."""
        if isinstance(files, (str, bytes, os.PathLike)) or not isinstance(files, Sequence):
            raise RecfnTypeError(f"from_files expects a list of file names, got {files!r}")
        if not files:
            raise RecfnValueError("a trace of files needs at least one file")
        trace = cls(None, name=name, wall_ns=wall_ns, error=error)
        trace._files = tuple(files)
        trace._dropped = dropped_events
        return trace

    @property
    def files(self) -> tuple[str, ...]:
        """The files a lazily loaded trace reads (empty for a trace held in memory)."""
        return self._files

    @property
    def footers(self) -> Footers:
        """The footers of the files of a lazily loaded trace, each read once
        (``recfn.formats.dataset.Footers``): its metadata, out-of-core summary and checks share them."""
        if self._footers is None:
            from recfn.formats.dataset import Footers

            self._footers = Footers()
        return self._footers

    @classmethod
    def from_pandas(cls, df: pd.DataFrame, *, name: str = "trace") -> Trace:
        """A trace of an event-table DataFrame (cast to the schema; ``df`` becomes its frame)."""
        from recfn.formats.schema import conform, metadata_of

        trace = cls(conform(df, name), name=name)
        df.attrs["recfn"] = {**metadata_of(trace._table), "cell": name}
        trace._df = df
        return trace

    # -- data -------------------------------------------------------------------------------

    @property
    def table(self) -> pa.Table:
        """The events as a ``pyarrow.Table`` (docs/schema.md); a trace of files reads them now."""
        if self._table is None:
            from recfn.formats.dataset import read, read_one

            table = read_one(self._files[0]) if self._one_file else read(self._files)
            if self._clock_offsets is not None:
                from recfn.formats.clocks import apply_clock_offsets

                table = apply_clock_offsets(table, self._clock_offsets)
            self._table = table
        return self._table

    def to_pandas(self, columns: Optional[Sequence[str]] = None) -> pd.DataFrame:
        """The events as a DataFrame carrying the ``df.recfn`` accessor (cached).

        ``columns``: those columns alone, in the table's order, converted by themselves (less
        to convert than the whole frame) unless the whole frame is cached already; such a
        frame is not cached. RecfnTypeError for anything but an iterable of names (a string
        included), RecfnValueError naming the columns the trace does not have."""
        if columns is not None:
            return self._columns_frame(columns)
        if self._df is None:
            from recfn.formats.schema import to_pandas

            df = to_pandas(self.table)
            df.attrs["recfn"]["cell"] = self.name
            self._df = df
        else:
            _hooks.pandas_returned()
        return self._df

    def _columns_frame(self, columns: Sequence[str]) -> pd.DataFrame:
        from recfn.formats.schema import column_names

        listed = column_names(columns)
        if listed is None:
            raise RecfnTypeError(
                f"to_pandas: columns must be a list of column names, got {columns!r}"
            )
        columns = listed
        table = self.table
        missing = [c for c in columns if c not in table.column_names]
        if missing:
            raise RecfnValueError(
                f"to_pandas: the trace has no column(s) {missing}; it has {table.column_names}"
            )
        wanted = set(columns)
        if self._df is not None:  # the cached frame's columns: its attrs and any window kept
            _hooks.pandas_returned()
            return self._df[[c for c in self._df.columns if c in wanted]]
        from recfn.formats.schema import to_pandas

        df = to_pandas(table.select([c for c in table.column_names if c in wanted]))
        df.attrs["recfn"]["cell"] = self.name
        return df

    @property
    def metadata(self) -> dict[str, str]:
        """The table's schema metadata as text (keys are ``recfn.formats.schema.*_KEY``)."""
        if self._metadata is None:
            from recfn.formats.schema import metadata_of

            self._metadata = metadata_of(self._metadata_table())
        return dict(self._metadata)

    def _metadata_table(self) -> pa.Table:
        """The table; for an unread trace of Parquet files an empty table with their metadata
        combined as reading them combines it (``dataset.combine_metadata``), from the footers
        alone."""
        if not self._unread_parquet():
            return self.table
        from recfn.formats.dataset import combine_metadata
        from recfn.formats.schema import metadata_of

        schemas = [self.footers.schema(f) for f in self._files]
        combined = combine_metadata([metadata_of(schema.empty_table()) for schema in schemas])
        return schemas[0].empty_table().replace_schema_metadata(combined)

    def _unread_parquet(self) -> bool:
        """Whether the trace is Parquet files not read yet, whose footers answer what they can
        (the table is read only when asked for)."""
        return (
            self._table is None
            and self._clock_offsets is None
            and bool(self._files)
            and all(f.lower().endswith((".parquet", ".pq")) for f in self._files)
        )

    def _meta_int(self, key: str) -> Optional[int]:
        try:
            return int(self.metadata[key])
        except (KeyError, ValueError):
            return None

    @property
    def dropped_events(self) -> int:
        """Events dropped because ``max_events`` was reached."""
        from recfn.formats.schema import DROPPED_EVENTS_KEY

        if self._dropped is not None:
            return self._dropped
        return self._meta_int(DROPPED_EVENTS_KEY) or 0

    @property
    def config(self) -> dict[str, Any]:
        """The profiler configuration the trace was captured with (empty if unknown)."""
        from recfn.formats.schema import CONFIG_KEY, json_object

        return json_object(self.metadata.get(CONFIG_KEY)) or {}

    @property
    def wall_ns(self) -> int:
        """Wall time of the capture; for files without it, the span from first start to last end."""
        if self._wall_ns is not None:
            return self._wall_ns
        from recfn.formats.schema import WALL_NS_KEY

        stored = self._meta_int(WALL_NS_KEY)
        if stored is not None:
            return stored
        import pyarrow.compute as pc

        if self._unread_parquet():  # the two columns alone, verified
            from recfn.formats.io import verified_row_groups

            columns = ["start_ns", "end_ns"]
            firsts, lasts, open_starts = [], [], []
            for name in self._files:
                for piece in verified_row_groups(name, self.footers(name), columns):
                    if not piece.num_rows:
                        continue
                    bounds = pc.min_max(piece.column("start_ns"))
                    firsts.append(bounds["min"].as_py())
                    open_starts.append(bounds["max"].as_py())
                    lasts.append(pc.max(piece.column("end_ns")).as_py())
            if not firsts:
                return 0
            known = [end for end in lasts if end is not None]
            first = min(firsts)
            last = max(known) if known else max(open_starts)  # only open ranges
            return max(int(last) - int(first), 0)
        table = self.table
        if table.num_rows == 0:
            return 0
        start = pc.min(table.column("start_ns")).as_py()
        end = pc.max(table.column("end_ns")).as_py()
        if end is None:  # only open ranges
            end = pc.max(table.column("start_ns")).as_py()
        return max(int(end) - int(start), 0)

    @property
    def host(self) -> Optional[str]:
        """The host that captured the trace (None when unknown)."""
        from recfn.formats.schema import HOST_KEY

        return self.metadata.get(HOST_KEY)

    @property
    def pid(self) -> Optional[int]:
        """The capturing process (None when unknown or when the trace spans several)."""
        from recfn.formats.schema import PID_KEY

        stored = self._meta_int(PID_KEY)
        if stored is not None:
            return stored
        import pyarrow.compute as pc

        pids = pc.unique(self.table.column("pid")).to_pylist()
        return int(pids[0]) if len(pids) == 1 and pids[0] is not None else None

    @property
    def error(self) -> Optional[str]:
        """How the capture ended when an exception ended it (``"KeyboardInterrupt"``,
        ``"KeyError: 'x'"``), else None; kept in saved files (``recfn.error``)."""
        if self._error is not None:
            return self._error
        if self._table is None and not self._files:
            return None
        from recfn.formats.schema import ERROR_KEY

        return self.metadata.get(ERROR_KEY) or None

    @error.setter
    def error(self, value: Optional[str]) -> None:
        self._error = value

    @property
    def interrupted(self) -> bool:
        """True when the capture ended with an exception (KeyboardInterrupt included)."""
        return self.error is not None

    @property
    def events(self) -> int:
        """Number of events (rows); of unread files, from their footers."""
        if self._unread_parquet():
            return sum(int(self.footers(name).num_rows) for name in self._files)
        return int(self.table.num_rows)

    @property
    def threads(self) -> int:
        """Number of distinct threads that recorded events; of unread files whose thread
        columns agree, from those columns alone (read and verified, the rest left unread).
        Counted once (a notebook's display asks several times)."""
        if self._threads is None:
            self._threads = self._count_threads()
        return self._threads

    def _count_threads(self) -> int:
        from recfn.formats.schema import THREAD_KEYS, distinct_rows

        if self._unread_parquet():
            present = {
                tuple(c for c in THREAD_KEYS if c in self.footers.schema(name).names)
                for name in self._files
            }
            keys = list(present.pop()) if len(present) == 1 else []
            if keys:
                return self._unread_threads(keys)
        table = self.table
        if table.num_rows == 0:
            return 0
        return distinct_rows(table.select([c for c in THREAD_KEYS if c in table.column_names]))

    def _unread_threads(self, keys: list[str]) -> int:
        """`threads` of unread files that all hold the thread columns ``keys``."""
        import pyarrow as pa

        from recfn.formats.io import verified_row_groups

        seen = []
        for name in self._files:
            for piece in verified_row_groups(name, self.footers(name), keys):
                found = piece.group_by(keys).aggregate([])
                for at, field in enumerate(found.schema):  # files' dictionaries differ
                    if pa.types.is_dictionary(field.type):
                        plain = found.column(at).cast(field.type.value_type)
                        found = found.set_column(at, field.name, plain)
                seen.append(found)
        if not seen:
            return 0
        return int(pa.concat_tables(seen).group_by(keys).aggregate([]).num_rows)

    # -- analysis (through the df.recfn accessor) ---------------------------------------------

    def summary(self, **kwargs: Any) -> pd.DataFrame:
        """``df.recfn.summary(**kwargs)``; cached per arguments. When the options allow (grouped
        by name; no memory or GPU columns), a trace of Parquet files not yet read is summarised
        out of core, one process at a time, and a trace in memory in one pass per process over
        its table (``recfn.analysis.outofcore.files``), with the same numbers."""
        if isinstance(kwargs.get("by"), Iterator):  # read once, though the paths look at it twice
            kwargs["by"] = list(kwargs["by"])
        try:
            key: Any = tuple(sorted(kwargs.items()))
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in self._summaries:
            return self._summaries[key]
        result: Optional[pd.DataFrame] = None
        if self._table is None and _hooks.files_summary is not None:
            result = _hooks.files_summary(self._files, self.footers, **kwargs)
        elif self._table is not None and _hooks.table_summary is not None:
            result = _hooks.table_summary(self._table, **kwargs)
        if result is None:
            result = self.to_pandas().recfn.summary(**kwargs)
        if key is not None:
            self._summaries[key] = result
        return result

    def diff(self, baseline: Union[Trace, pd.DataFrame]) -> pd.DataFrame:
        """``df.recfn.diff``: per name, how this trace changed from ``baseline``."""
        base_df = baseline.to_pandas() if isinstance(baseline, Trace) else baseline
        result: pd.DataFrame = self.to_pandas().recfn.diff(base_df)
        return result

    def compare(self, baseline: Any, **options: Any) -> Any:
        """``recfn.compare(baseline, self, **options)``: how this trace (a run) changed from
        `baseline` (a run set: a trace, a folder of runs, a list...), per name, noise-aware; a
        ``Comparison`` that a notebook shows as a table with change bars and a differential
        flame view (docs/compare.md)."""
        if _hooks.compare is None:
            raise RecfnValueError("compare needs recfn.analysis (import recfn)")
        return _hooks.compare(baseline, self, **options)

    def timeline(self, ax: Optional[Axes] = None, **kwargs: Any) -> Axes:
        """``df.recfn.timeline(ax=ax, ...)`` titled with this trace's name."""
        kwargs.setdefault("title", self.name)
        drawn: Axes = self.to_pandas().recfn.timeline(ax=ax, **kwargs)
        return drawn

    # -- files --------------------------------------------------------------------------------

    def save(self, path: Any, *, overwrite: bool = False) -> None:
        """Write the trace: Parquet for ``.parquet``/``.pq``, Chrome JSON for ``.json``/``.json.gz``
        (ValueError naming the accepted suffixes for any other name). The file appears whole or
        not at all; a file recfn did not write is replaced only with ``overwrite=True``
        (FileExistsError otherwise). Chrome JSON is written a batch of rows at a time; how large
        it will be is told beforehand by ``recfn.formats.chrome.estimate_chrome_bytes(trace.table,
        compressed=path.endswith(".gz"))``."""
        from recfn.formats.io import save

        save(self.table_as_saved(), path, overwrite=overwrite)

    def table_as_saved(self) -> pa.Table:
        """The table as ``save`` writes it: with the capture's error, if any, in its metadata,
        so that a crash or Ctrl-C stays said in the file."""
        from recfn.formats.schema import ERROR_KEY

        table = self.table
        error = self.error
        if error is not None:
            metadata = dict(table.schema.metadata or {})
            metadata[ERROR_KEY.encode()] = error.encode()
            table = table.replace_schema_metadata(metadata)
        return table

    # -- reprs --------------------------------------------------------------------------------

    def header(self) -> str:
        """One line: name, wall time, events, threads, dropped, and how the capture ended."""
        if _hooks.header_renderer is not None:
            return _hooks.header_renderer(self)
        parts = [
            f"recfn · {self.name}",
            f"{self.wall_ns / 1e6:.3f} ms wall",
            f"{self.events:,} events",
            f"{self.threads} threads",
            f"{self.dropped_events:,} dropped",
        ]
        if self.error:
            parts.append(f"interrupted by {self.error}")
        return " · ".join(parts)

    def __repr__(self) -> str:
        return f"<recfn.Trace {self.header()}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        if cycle or _hooks.text_renderer is None:
            printer.text(repr(self))
        else:
            printer.text(_hooks.text_renderer(self))

    def _repr_html_(self) -> str:
        if _hooks.html_renderer is not None:
            return _hooks.html_renderer(self)
        return f"<p>{html.escape(self.header())}</p>"


def describe_error(exc: Optional[BaseException]) -> Optional[str]:
    """``"KeyboardInterrupt"`` or ``"ValueError: bad"`` for the header; None when all went well."""
    if exc is None:
        return None
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if len(first) > 80:
        first = first[:77] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def load(
    path: Any,
    as_pandas: bool = False,
    *,
    clock_offsets: Any = None,
    lazy: Optional[bool] = None,
) -> Any:
    """A ``Trace`` of a trace file: recfn Parquet, any Parquet with the event table's columns, or
    Chrome JSON (``.json``/``.json.gz``, torch.profiler's too), told apart by the first bytes.

    A folder (a dataset of ``profile(output=...)``), a glob pattern or a list of paths gives one
    trace over all their files, read lazily (``recfn.formats.dataset``; ``Trace.files``).
    ``as_pandas=True`` returns ``trace.to_pandas()`` instead.

    ``lazy``: whether a recfn Parquet file is read when first used rather than now. By default
    (None) files of ``LAZY_ROWS`` events or more are: ``summary()`` then runs out of core, reading
    only what it needs (verified all the same), and ``.table`` or ``.to_pandas()`` read the whole
    file. A lazy load checks the file's footer and schema now and its values when they are read;
    other formats, and Parquet that recfn did not write, are always read now, and datasets
    always lazily. TypeError for a ``lazy`` that is not a bool or None.

    ``clock_offsets`` lines up hosts whose clocks disagree (``recfn.formats.clocks``): ``{host: ns}``
    added to each host's times, or the name of a mark every process recorded at the same moment
    (``"sync"``), from which they are estimated; the metadata ``recfn.clock_offsets`` records
    what was applied. A trace of files applies them when it reads the files (its out-of-core
    summary needs no offsets: durations do not change). Errors: FileNotFoundError for a
    missing path or a folder with no trace files; ``TraceFormatError``, naming the file and what
    is wrong, for everything else that is not a readable trace: a FIFO, device or socket
    (refused without blocking), an empty, foreign, corrupt or truncated file, or Chrome JSON
    that ``recfn.formats.chrome.read_chrome_trace`` refuses; TypeError for a `path` that is not a path.
    No other exception comes from a bad file.
    """
    from recfn.formats import dataset, io
    from recfn.formats.files import path_name

    if lazy is not None and not isinstance(lazy, bool):
        raise RecfnTypeError(f"lazy must be True, False or None, got {type(lazy).__name__}")
    if clock_offsets is not None and not isinstance(clock_offsets, str):
        from recfn.formats.clocks import check_offsets

        clock_offsets = check_offsets(clock_offsets)
    if dataset.is_many(path):
        footers = dataset.Footers()
        files = dataset.resolve_dataset(path, footers)
        many = Trace.from_files(files, name=_label(path))
        many._footers = footers
        many._clock_offsets = clock_offsets
        return many.to_pandas() if as_pandas else many

    name = path_name(path)
    label = os.path.basename(name)
    if lazy is not False and io.sniff(name) == io.PARQUET:
        footers = dataset.Footers()
        if _reads_lazily(name, footers, lazy):
            one = Trace.from_files([name], name=label)
            one._one_file = True
            one._footers = footers
            one._clock_offsets = clock_offsets
            return one.to_pandas() if as_pandas else one
    trace = Trace(dataset.read_one(name), name=label)
    if clock_offsets is not None:
        from recfn.formats.clocks import apply_clock_offsets

        trace = Trace(apply_clock_offsets(trace.table, clock_offsets), name=label)
    return trace.to_pandas() if as_pandas else trace


LAZY_ROWS = 1_000_000
"""``load`` reads recfn Parquet files of this many events or more lazily (``lazy=None``)."""


def _reads_lazily(name: str, footers: Footers, lazy: Optional[bool]) -> bool:
    """Whether ``load`` keeps the Parquet file ``name`` unread: a recfn file (its schema
    version in the footer) that ``lazy`` asks to be, or by default one of ``LAZY_ROWS`` events
    or more. Its footer and schema are checked here (``io.check_footer``), as a read checks
    them first; TraceFormatError when they are broken."""
    from recfn.formats import io
    from recfn.formats.schema import SCHEMA_VERSION_KEY

    footer = footers(name)
    arrow_schema = footers.schema(name)
    if SCHEMA_VERSION_KEY.encode() not in (arrow_schema.metadata or {}):
        return False  # foreign Parquet: conformed as it is read
    if not lazy and footer.num_rows < LAZY_ROWS:
        return False
    io.check_footer(name, footer, arrow_schema)
    return True


def _label(source: Any) -> str:
    if isinstance(source, (list, tuple)):
        return f"{len(source)} traces"
    name = str(os.fspath(source))
    return os.path.basename(name.rstrip("/\\")) or name


def merge(
    traces: Sequence[Union[Trace, pa.Table]],
    *,
    name: str = "merged",
    wall_ns: Optional[int] = None,
) -> Trace:
    """One trace from several (traces or event tables); ids stay unique, optional columns are
    unioned. Each later trace whose ids reach down into those before it is renumbered (ids and
    parent ids shifted together), so traces of one process keep their ids. The first trace's
    metadata is kept, with the dropped events summed; ``wall_ns`` defaults to the sum of the
    traces' wall times, errors are joined and cells listed in order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from recfn.formats.schema import DROPPED_EVENTS_KEY, WALL_NS_KEY, validate

    if isinstance(traces, (Trace, pa.Table)) or not isinstance(traces, Sequence):
        raise RecfnTypeError(
            f"merge expects a list of traces or event tables, got {type(traces).__name__}"
        )
    if not traces:
        raise RecfnValueError("merge needs at least one trace")
    items = [t if isinstance(t, Trace) else Trace(validate(t, "merge")) for t in traces]
    parts: list[pa.Table] = []
    top: Optional[int] = None
    for item in items:
        table = item.table
        if table.num_rows:
            ids = table.column("id")
            low = int(pc.min(ids).as_py())
            if top is not None and low <= top:
                shift = pa.scalar(top + 1 - low, pa.int64())
                table = table.set_column(
                    table.schema.get_field_index("id"), "id", pc.add(ids, shift)
                ).set_column(
                    table.schema.get_field_index("parent_id"),
                    "parent_id",
                    pc.add(table.column("parent_id"), shift),
                )
            high = int(pc.max(table.column("id")).as_py())
            top = high if top is None else max(top, high)
        parts.append(table.replace_schema_metadata(None))
    merged = pa.concat_tables(parts, promote_options="default").unify_dictionaries()
    wall = sum(t.wall_ns for t in items) if wall_ns is None else wall_ns
    metadata = items[0].metadata
    metadata[DROPPED_EVENTS_KEY] = str(sum(t.dropped_events for t in items))
    metadata[WALL_NS_KEY] = str(wall)
    return Trace(
        merged.combine_chunks().replace_schema_metadata(metadata),
        name=name,
        wall_ns=wall,
        error="; ".join(f"{t.name}: {t.error}" for t in items if t.error) or None,
        cells=tuple(cell for t in items for cell in t.cells),
    )
