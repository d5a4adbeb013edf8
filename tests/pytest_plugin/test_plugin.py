"""The pytest plugin, in subprocess pytest sessions: off unless asked, a run per session, one
process folder per xdist worker, the comparison in the terminal summary, and a session failed
on a planted slowdown. Planted effects live in a rewritten baseline, so no verdict depends on
how fast this machine runs the tests."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import recfn
from recfn.formats.trace import Trace

TESTS = """
def work(n):
    return sum(i * i for i in range(n))

def test_fast():
    work(200)

def test_slow():
    work(2000)

def test_other():
    work(500)
"""

CHECK = """
import sys

def pytest_sessionfinish(session):
    print("RECFN-PLUGIN", session.config.pluginmanager.has_plugin("recfn-session"),
          "recfn.pytest_plugin._plugin" in sys.modules)
"""


def pytest_session(
    project: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "test_work.py").write_text(textwrap.dedent(TESTS))
    return tmp_path


def test_the_plugin_is_registered_and_off_unless_asked(project: Path, checkout_env) -> None:
    (project / "conftest.py").write_text(textwrap.dedent(CHECK))
    proc = pytest_session(project, checkout_env, "-s")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RECFN-PLUGIN False False" in proc.stdout
    assert "--recfn" in pytest_session(project, checkout_env, "--help").stdout


def test_recfn_records_every_test_by_node_id_into_a_run(project: Path, checkout_env) -> None:
    proc = pytest_session(project, checkout_env, "--recfn", "runs/", "--recfn-repeat", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    frame = recfn.load(project / "runs" / "run-0001", as_pandas=True)
    counts = frame["name"].astype(str).value_counts()
    assert counts["test_work.py::test_slow"] == 3
    assert counts["test_work.py::test_fast"] == 3


def test_xdist_workers_write_a_process_folder_each(project: Path, checkout_env) -> None:
    pytest.importorskip("xdist")
    proc = pytest_session(project, checkout_env, "-n", "2", "--dist", "each", "--recfn", "runs/")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    processes = list((project / "runs" / "run-0001").glob("hostname=*/process=*"))
    assert len(processes) == 2
    for folder in processes:
        names = set(recfn.load(folder, as_pandas=True)["name"].astype(str))
        assert "test_work.py::test_slow" in names


def planted_baseline(
    project: Path, env: dict[str, str], factor: dict[str, float], *args: str
) -> Path:
    """A baseline run set: a real session, each named test's durations multiplied."""
    proc = pytest_session(project, env, "--recfn", "recorded/", "--recfn-repeat", "6", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    frame = recfn.load(project / "recorded" / "run-0001", as_pandas=True)
    names = frame["name"].astype(str)
    for test, times in factor.items():
        rows = names == f"test_work.py::{test}"
        duration = (frame.loc[rows, "end_ns"] - frame.loc[rows, "start_ns"]) * times
        frame.loc[rows, "end_ns"] = frame.loc[rows, "start_ns"] + duration.round().astype("int64")
    (project / "baseline").mkdir()
    Trace.from_pandas(frame).save(project / "baseline" / "run-0001.parquet")
    return project / "baseline"


def test_a_planted_slowdown_fails_the_session_naming_the_test(project: Path, checkout_env) -> None:
    # the baseline says test_slow took a thousandth of its time: now it is far slower
    baseline = planted_baseline(project, checkout_env, {"test_slow": 0.001})
    proc = pytest_session(
        project, checkout_env, "--recfn-baseline", str(baseline), "--recfn-fail-on", "10%",
        "--recfn-repeat", "6",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout
    summary = proc.stdout[proc.stdout.index("recfn") :]
    assert "got slower by more than 10.0%: test_work.py::test_slow" in summary


def test_a_session_without_regressions_passes_with_the_table(project: Path, checkout_env) -> None:
    # the baseline says both tests took a thousand times longer: nothing got slower (two
    # tests: too few for a common shift, so the change is taken as it is)
    pick = ("-k", "fast or slow")
    baseline = planted_baseline(project, checkout_env, {"test_fast": 1e3, "test_slow": 1e3}, *pick)
    proc = pytest_session(
        project, checkout_env, "--recfn-baseline", str(baseline), "--recfn-fail-on", "10%",
        "--recfn-repeat", "6", *pick,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "test_work.py::test_slow" in proc.stdout and "bootstrap over calls" in proc.stdout


def test_fail_on_without_a_baseline_is_a_usage_error(project: Path, checkout_env) -> None:
    proc = pytest_session(project, checkout_env, "--recfn-fail-on", "10%")
    assert proc.returncode == 4
    assert "--recfn-fail-on needs" in proc.stderr
