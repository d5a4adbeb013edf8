"""``recfn run -o traces/`` follows multiprocessing (fork, spawn) and process-pool children."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import recfn
from recfn.formats.dataset import unfinished, unfinished_captures

SCRIPT = """
import multiprocessing as mp, sys
from concurrent.futures import ProcessPoolExecutor
import recfn

def work(k):
    with recfn.record_function("child_work"):
        return k

if __name__ == "__main__":
    context = mp.get_context(sys.argv[1])
    children = [context.Process(target=work, args=(k,)) for k in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join()
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        assert list(pool.map(work, range(4))) == [0, 1, 2, 3]
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_recfn_run_follows_children_into_one_dataset(tmp_path: Path, method: str) -> None:
    script = tmp_path / "kids.py"
    script.write_text(SCRIPT)
    output = tmp_path / "traces"
    done = subprocess.run(
        [sys.executable, "-m", "recfn", "run", str(script), "-o", f"{output}/", "-q", "--", method],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    df = recfn.load(output, as_pandas=True)
    work = df[df["name"] == "child_work"]
    assert len(work) == 6 and work["end_ns"].notna().all()
    main = df[df["name"] == "__main__"]
    assert len(main) == 1 and int(main["pid"].iloc[0]) not in set(work["pid"])
    assert work["pid"].nunique() >= 3  # two Process children, at least one pool worker
    assert len(list(output.glob("hostname=*/process=*"))) == df["pid"].nunique()


POOL = """
import multiprocessing as mp, sys
import recfn

def work(k):
    for _ in range(100):
        with recfn.record_function("child_work"):
            pass
    return k

if __name__ == "__main__":
    with mp.get_context(sys.argv[1]).Pool(2) as pool:  # __exit__ terminates the workers
        assert sorted(pool.map(work, range(20))) == list(range(20))
"""


def run_recfn(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(body)
    return subprocess.run(
        [sys.executable, "-m", "recfn", "run", str(script), "-q", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_workers_a_pool_terminates_write_what_they_recorded(tmp_path: Path, method: str) -> None:
    """``with Pool(...)`` ends with ``terminate()``: SIGTERM to workers that are waiting for
    work. Each stops its profile before it dies of the signal, so every event is written."""
    output = tmp_path / "traces"
    done = run_recfn(tmp_path, POOL, "-o", f"{output}/", "--", method)
    assert done.returncode == 0, done.stderr
    trace = recfn.load(output)
    df = trace.to_pandas()
    assert int((df["name"] == "child_work").sum()) == 2000
    assert unfinished(trace.files) == []


DIES_EARLY = """
import multiprocessing as mp, os, signal, sys
import recfn

def die(how):
    with recfn.record_function("doomed"):
        if how == "os._exit":
            os._exit(3)
        os.kill(os.getpid(), getattr(signal, how))

if __name__ == "__main__":
    how = sys.argv[1]
    if how == "fork":  # a plain os.fork child that leaves with os._exit
        pid = os.fork()
        if pid == 0:
            with recfn.record_function("doomed"):
                os._exit(0)
        os.waitpid(pid, 0)
    else:
        child = mp.get_context("fork").Process(target=die, args=(how,))
        child.start()
        child.join()
"""


@pytest.mark.parametrize("how", ["SIGKILL", "os._exit", "fork"])
def test_a_child_that_dies_before_its_first_part_is_reported(tmp_path: Path, how: str) -> None:
    """A child killed (or leaving through os._exit) before it wrote any event still left the
    part that says it started: its folder is unfinished, and the summary says what is lost."""
    output = tmp_path / "traces"
    done = run_recfn(tmp_path, DIES_EARLY, "-o", f"{output}/", "--", how)
    assert done.returncode == 0, done.stderr
    trace = recfn.load(output)
    (lost,) = unfinished_captures(trace.files)
    assert lost.events == 0 and lost.last_written_ns is None
    assert "everything it recorded is lost" in lost.describe()
    folders = {p.name for p in output.glob("hostname=*/process=*")}
    assert len(folders) == 2 and os.path.basename(lost.folder) in folders
    summary = subprocess.run(
        [sys.executable, "-m", "recfn", "summary", str(output)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert summary.returncode == 0, summary.stderr
    assert f"{lost.folder}: this process never stopped its profile" in summary.stdout


def test_a_child_terminated_before_its_first_part_writes_what_it_recorded(tmp_path: Path) -> None:
    output = tmp_path / "traces"
    done = run_recfn(tmp_path, DIES_EARLY, "-o", f"{output}/", "--", "SIGTERM")
    assert done.returncode == 0, done.stderr
    trace = recfn.load(output)
    assert unfinished(trace.files) == []
    doomed = trace.to_pandas().query("name == 'doomed'")
    assert len(doomed) == 1 and doomed["end_ns"].isna().all()  # written, still open
