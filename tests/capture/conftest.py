"""Fixtures for the capture tests."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture
def quiet_gc() -> Iterator[None]:
    """No automatic garbage collection while the test runs: a collection inside a traced window
    runs other libraries' gc callbacks and finalizers (hypothesis registers one), whose calls
    would be traced too, so counts of traced calls would depend on which tests ran before.
    ``gc.collect()`` still works; the collector's state is restored after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
