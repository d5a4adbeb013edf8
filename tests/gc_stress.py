"""A pytest plugin that makes order-dependent counts of traced calls show at once: a Python gc
callback, as hypothesis registers one, and collections every few allocations. A test that counts
traced calls without ``quiet_gc`` (tests/conftest.py) then counts the callback's calls too:

    PYTHONPATH=tests python -m pytest -p gc_stress tests/capture/test_trace_calls.py
"""

from __future__ import annotations

import gc
from typing import Any


def _gc_callback(phase: str, info: dict[str, Any]) -> None:
    """Does nothing; what matters is that it is Python code that a tracer would record."""


_THRESHOLDS = gc.get_threshold()


def pytest_configure(config: Any) -> None:
    gc.callbacks.append(_gc_callback)
    gc.set_threshold(20, 1, 1)


def pytest_unconfigure(config: Any) -> None:
    if _gc_callback in gc.callbacks:
        gc.callbacks.remove(_gc_callback)
    gc.set_threshold(*_THRESHOLDS)
