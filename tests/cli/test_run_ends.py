"""How a ``recfn run`` ends is kept: SIGTERM and SIGHUP as Ctrl-C (what was captured saved, the
conventional exit code), a crash or an interrupt said in the saved file, and an output that
cannot be written refused before the script runs."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import recfn
from recfn.dataset import unfinished

ENV: dict[str, str] = {}


@pytest.fixture(autouse=True, scope="module")
def _subprocess_env(checkout_env: dict[str, str]) -> None:
    ENV.update(checkout_env)


SLOW = """
import pathlib, sys, time
import recfn

for step in range(600):  # a minute at most: the test signals it long before
    with recfn.record_function("step"):
        time.sleep(0.1)
    if step == 2:
        pathlib.Path(sys.argv[1]).write_text("ready")
"""


def run_until_signalled(tmp_path: Path, signum: int, output: str) -> tuple[int, str]:
    """``recfn run`` of a script that records for a while, sent ``signum`` once it has
    recorded a few ranges: its exit code and stderr."""
    script = tmp_path / "slow.py"
    script.write_text(SLOW)
    ready = tmp_path / "ready"
    # Under nohup (or any parent that ignores SIGHUP) the child would inherit the ignoring,
    # and recfn run rightly leaves an ignored signal ignored: the child starts with the default.
    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "recfn", "run", "-q", "--no-trace-calls", str(script),
             "-o", output, "--", str(ready)],
            cwd=tmp_path,
            env=ENV,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
    finally:
        signal.signal(signal.SIGHUP, previous)
    try:
        for _ in range(1200):  # up to two minutes for the interpreter to start
            if ready.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert ready.exists(), "the script never got going"
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_terminated_run_keeps_its_capture_and_exits_128_plus_the_signal(
    tmp_path: Path, signum: int
) -> None:
    code, stderr = run_until_signalled(tmp_path, signum, "t.parquet")
    name = signal.Signals(signum).name
    assert code == 128 + signum, stderr
    assert f"terminated by {name}" in stderr and "Traceback" not in stderr
    trace = recfn.load(tmp_path / "t.parquet")
    assert trace.interrupted and trace.error == f"Terminated: {name}"
    assert int((trace.to_pandas()["name"] == "step").sum()) >= 3


def test_a_terminated_run_into_a_dataset_writes_its_last_part(tmp_path: Path) -> None:
    code, stderr = run_until_signalled(tmp_path, signal.SIGTERM, "traces/")
    assert code == 128 + signal.SIGTERM, stderr
    trace = recfn.load(tmp_path / "traces")
    assert unfinished(trace.files) == []
    assert trace.error == "Terminated: SIGTERM"
    assert int((trace.to_pandas()["name"] == "step").sum()) >= 3


CRASH = """
import sys
import recfn

with recfn.record_function("work"):
    pass
if sys.argv[1] == "crash":
    raise KeyError("missing")
raise KeyboardInterrupt
"""


@pytest.mark.parametrize(
    ("how", "error", "code"),
    [("crash", "KeyError: 'missing'", 1), ("ctrl-c", "KeyboardInterrupt", 130)],
)
@pytest.mark.parametrize("output", ["t.parquet", "traces/"])
def test_a_crash_or_ctrl_c_is_said_by_the_saved_trace(
    tmp_path: Path, how: str, error: str, code: int, output: str
) -> None:
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    run = subprocess.run(
        [sys.executable, "-m", "recfn", "run", "-q", str(script), "-o", output, "--", how],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == code, run.stderr
    trace = recfn.load(tmp_path / output)
    assert trace.interrupted and trace.error == error
    summary = subprocess.run(
        [sys.executable, "-m", "recfn", "summary", str(tmp_path / output)],
        env=ENV, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert summary.returncode == 0, summary.stderr
    assert f"interrupted by {error}" in summary.stdout


RECORDS = """
import pathlib, sys
pathlib.Path(sys.argv[1]).write_text("ran")
"""


@pytest.mark.parametrize("flag", ["-o", "--timeline"])
def test_an_output_recfn_did_not_write_is_refused_before_the_script_runs(
    tmp_path: Path, flag: str
) -> None:
    script = tmp_path / "job.py"
    script.write_text(RECORDS)
    user_file = tmp_path / ("userdata.parquet" if flag == "-o" else "photo.png")
    user_file.write_bytes(b"the user's own data")
    ran = tmp_path / "ran"
    run = subprocess.run(
        [sys.executable, "-m", "recfn", "run", str(script), flag, str(user_file), "--", str(ran)],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 1
    assert run.stderr.startswith("recfn: error: ") and "--force" in run.stderr
    assert not ran.exists()  # refused before the script ran
    assert user_file.read_bytes() == b"the user's own data"
