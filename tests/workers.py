"""Child-process bodies for the fleet tests (a module of their own, so spawn can import them)."""

from __future__ import annotations

import glob
import os
from typing import Any

import recfn


def record(output: str, rank: int, steps: int) -> None:
    """A worker: ``steps`` ``step`` ranges, each with an ``inner`` range, into ``output``."""
    os.environ["RANK"] = str(rank)
    with recfn.profile(output=output), recfn.record_function("worker"):
        for _ in range(steps):
            with recfn.record_function("step"), recfn.record_function("inner"):
                pass


def record_until_killed(output: str, written: Any) -> None:
    """Record for ever; set ``written`` once a part of its events is on disk (past the empty
    one that says it started)."""
    own = os.path.join(output, "*", f"process={os.getpid()}", "*.parquet")
    with recfn.profile(output=output, max_events=70_000), recfn.record_function("forever"):
        while True:
            for _ in range(1000):
                with recfn.record_function("step"):
                    pass
            if not written.is_set() and len(glob.glob(own)) >= 2:
                written.set()
