"""The exceptions the ``df.recfn`` accessor raises for frames it cannot analyse.

Each is a ``ValueError`` (bad input); `schema.MissingColumnsError` covers absent columns.
"""

from __future__ import annotations


class MalformedFrameError(ValueError):
    """The frame's values break the event-table schema (docs/schema.md): duplicate or null
    ids, a cycle in ``parent_id``, a null ``start_ns``, a range that ends before it starts or
    durations past int64. The message names the problem and the first offending ids."""


class NothingToDrawError(ValueError):
    """A plot's selection (threads, time window, depth) holds nothing it could draw."""
