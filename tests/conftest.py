"""Shared fixtures: every test starts and ends with a clean engine; subprocesses get this checkout."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import matplotlib
import pytest

import recfn

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def clean_engine() -> Iterator[None]:
    """Every test starts and ends with no callbacks, ranges enabled, no profile function
    installed and no range open on the main thread (a test that leaves call tracing on, or a
    range entered, fails here rather than the next test of its worker)."""
    recfn.clear_callbacks()
    recfn.enable_record_function(True)
    yield
    recfn.clear_callbacks()
    recfn.enable_record_function(True)
    assert sys.getprofile() is None
    assert recfn.current_range() is None, f"a range is left open: {recfn.current_range()!r}"


@pytest.fixture(scope="session")
def checkout_env() -> dict[str, str]:
    """Environment for subprocesses and kernels: this checkout first on the path (whatever an
    older install registered), matplotlib on Agg, no warnings on stderr."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, MPLBACKEND="Agg", PYTHONWARNINGS="ignore")


@pytest.fixture
def quiet_gc() -> Iterator[None]:
    """No garbage collection inside the test but its own, and no other library's gc callbacks:
    for tests that count traced calls exactly. A collection inside a traced window runs the gc
    callbacks other libraries registered (hypothesis has one) and the finalizers of earlier
    tests' garbage, whose calls would be traced too, so the counts would depend on which tests
    ran before. Earlier garbage is collected first; the callbacks and the collector's state
    are restored after. ``-p gc_stress`` (tests/gc_stress.py) shows a test that lacks it."""
    enabled = gc.isenabled()
    callbacks = list(gc.callbacks)
    gc.callbacks.clear()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.callbacks[:] = callbacks
        if enabled:
            gc.enable()
