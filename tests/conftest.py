"""Shared fixtures: every test starts and ends with a clean engine; subprocesses get this checkout."""

from __future__ import annotations

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
    """Every test starts and ends with no callbacks, ranges enabled and no profile function
    installed (a test that leaves call tracing on fails here)."""
    recfn.clear_callbacks()
    recfn.enable_record_function(True)
    yield
    recfn.clear_callbacks()
    recfn.enable_record_function(True)
    assert sys.getprofile() is None


@pytest.fixture(scope="session")
def checkout_env() -> dict[str, str]:
    """Environment for subprocesses and kernels: this checkout first on the path (whatever an
    older install registered), matplotlib on Agg, no warnings on stderr."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, MPLBACKEND="Agg", PYTHONWARNINGS="ignore")
