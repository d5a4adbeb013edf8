"""``recfn run -o traces/`` follows multiprocessing (fork, spawn) and process-pool children."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import recfn

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
