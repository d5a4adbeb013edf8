"""Every instrumentation test runs against a clean engine."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

import recfn


@pytest.fixture(autouse=True)
def clean_engine() -> Iterator[None]:
    """Every test starts and ends with no callbacks and no profile function installed."""
    recfn.clear_callbacks()
    yield
    recfn.clear_callbacks()
    assert sys.getprofile() is None
