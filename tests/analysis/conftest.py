"""Fixtures for the analysis tests: matplotlib's Agg backend and hand-built event tables."""

from __future__ import annotations

from collections.abc import Iterator

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from known_frames import GPU_SPANS, KNOWN_ROWS, OVERLAPPING_ROWS, make_frame, with_gpu

import recfn.analysis as analysis


@pytest.fixture
def known_gpu() -> pd.DataFrame:
    return with_gpu(make_frame(KNOWN_ROWS), GPU_SPANS)


@pytest.fixture
def known() -> pd.DataFrame:
    return make_frame(KNOWN_ROWS)


@pytest.fixture
def overlapping() -> pd.DataFrame:
    return make_frame(OVERLAPPING_ROWS)


@pytest.fixture(autouse=True)
def close_figures() -> Iterator[None]:
    yield
    plt.close("all")


@pytest.fixture(scope="session")
def million() -> pd.DataFrame:
    """1M nested ranges over 8 threads, with marks and memory events; built once."""
    return analysis.make_synthetic_trace(1_000_000, 8, n_marks=2_000, n_memory_events=2_000, seed=7)
