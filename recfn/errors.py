"""recfn's exceptions and warnings, all in one place.

Every exception recfn raises on purpose derives from `RecfnError`, so ``except
recfn.RecfnError`` catches any mistake recfn reports; each also keeps the built-in base that its
documentation promises (``ValueError`` for bad values and bad files, ``TypeError`` for bad types,
``FileNotFoundError`` for missing paths, ...), so existing ``except`` clauses keep working.
"""

from __future__ import annotations


class RecfnError(Exception):
    """The base of every exception recfn raises on purpose."""


class RecfnValueError(RecfnError, ValueError):
    """An argument's value that recfn cannot use; the message names the argument."""


class RecfnTypeError(RecfnError, TypeError):
    """An argument of a type recfn cannot use; the message names the argument."""


class RecfnStateError(RecfnError, RuntimeError):
    """A call that does not fit the current state (a profiler already enabled on this thread, a
    range ended twice, a profile used after it stopped)."""


class TraceNotFoundError(RecfnError, FileNotFoundError):
    """A trace path (or a folder or glob with no trace files) that does not exist."""


class TraceIsADirectoryError(RecfnError, IsADirectoryError):
    """A folder where a single trace file was expected."""


class TraceExistsError(RecfnError, FileExistsError):
    """A file recfn would overwrite although it did not write it."""


class TraceFormatError(RecfnError, ValueError):
    """A file or table that is not a readable recfn trace (foreign, truncated or too new)."""


class MissingColumnsError(RecfnError, AttributeError, ValueError):
    """The frame lacks columns that an operation needs.

    It subclasses both ``AttributeError`` (the pandas accessor convention) and ``ValueError``
    (bad input), so either ``except`` clause catches it.
    """


class MalformedFrameError(RecfnError, ValueError):
    """The frame's values break the event-table schema (docs/schema.md): duplicate or null
    ids, a cycle in ``parent_id``, a null ``start_ns``, a range that ends before it starts or
    durations past int64. The message names the problem and the first offending ids."""


class EventNotFoundError(RecfnError, KeyError):
    """No event has the id asked for (``df.recfn.children(event_id)``): a ``KeyError``, as a
    lookup's."""

    def __str__(self) -> str:  # KeyError's own quotes its message
        return str(self.args[0]) if self.args else ""


class NothingToDrawError(RecfnError, ValueError):
    """A plot's selection (threads, time window, depth) holds nothing it could draw."""


class RunSetError(RecfnError, ValueError):
    """Run sets that cannot be compared (``recfn.compare``, ``recfn compare``): runs of
    different workloads (no range name in common), of different schema versions, grouped by
    different keys, or a side with no runs; the message names what differs."""


class OptionError(RecfnError, ValueError):
    """A capture option's value that ``ProfilerConfig`` refused; the message names the option."""


class CaptureError(RecfnError):
    """A capture (a magic cell, ``recfn run``) could not start: a bad option, a profiler already
    running, an output path recfn may not write."""


class QueryError(RecfnError, ValueError):
    """A timeline widget's viewport query or lookup with bad arguments; the message names the
    argument."""


class CLIError(RecfnError):
    """A user mistake on the command line: ``recfn`` prints ``recfn: error: <message>`` and
    exits with ``code`` (1, or 2 for bad usage)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class NativeWarning(RuntimeWarning):
    """A compiled build whose native parts did not all load or install: recfn still works, on
    its slower pure-Python path (``recfn.build_info()`` says what is native)."""
