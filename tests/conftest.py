"""Shared fixtures: every test starts and ends with no callbacks and ranges enabled."""

from __future__ import annotations

import os
from collections.abc import Iterator

import matplotlib
import pytest

import recfn

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(autouse=True)
def clean_engine() -> Iterator[None]:
    recfn.clear_callbacks()
    recfn.enable_record_function(True)
    yield
    recfn.clear_callbacks()
    recfn.enable_record_function(True)
