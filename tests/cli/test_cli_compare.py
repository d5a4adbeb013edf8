"""``recfn compare``: formats, the ``--fail-on`` gate and its exit codes, steps across run sets,
bad input; ``recfn run --repeat``. Run sets are synthetic with planted effects: no test
depends on time measured here (``recfn run --repeat`` is checked for what it writes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from io import StringIO
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recfn.analysis.synthetic import make_synthetic_run
from recfn.cli import main
from recfn.formats.trace import Trace


def run_set(folder: Path, count: int, first_seed: int, **options: object) -> str:
    folder.mkdir(parents=True)
    for i in range(count):
        frame = make_synthetic_run(first_seed + i, **options)  # type: ignore[arg-type]
        Trace.from_pandas(frame).save(folder / f"run-{i:04d}.parquet")
    return str(folder)


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("runsets")
    return {
        "base": run_set(root / "base", 6, 0),
        "same": run_set(root / "same", 6, 100),
        "slow": run_set(root / "slow", 6, 200, slowdown={"load": 1.10}),
        "later": run_set(root / "later", 6, 300, slowdown={"load": 1.10}),
    }


def compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["compare", *args])
    found = capsys.readouterr()
    return code, found.out, found.err


def test_the_table_shows_each_name_with_its_verdict(capsys, sets) -> None:
    code, out, err = compare(capsys, sets["base"], sets["slow"])
    assert code == 0 and err == ""
    line = next(line for line in out.splitlines() if line.startswith("load "))
    assert "slower" in line
    assert "bootstrap over runs" in out


def test_json_is_the_comparison(capsys, sets) -> None:
    code, out, _ = compare(capsys, sets["base"], sets["slow"], "--format", "json")
    found = json.loads(out)
    assert code == 0
    assert {row["name"]: row["verdict"] for row in found["rows"]}["load"] == "slower"
    assert found["runs"] == {"baseline": 6, "candidate": 6}


def test_csv_has_a_row_per_name(capsys, sets) -> None:
    _, out, _ = compare(capsys, sets["base"], sets["slow"], "--format", "csv")
    frame = pd.read_csv(StringIO(out))
    assert frame.set_index("name").loc["load", "verdict"] == "slower"


def test_markdown_is_a_table(capsys, sets) -> None:
    _, out, _ = compare(capsys, sets["base"], sets["slow"], "--format", "md")
    assert any(line.startswith("| load |") for line in out.splitlines())
    assert "|---|" in out


def test_fail_on_exits_3_naming_the_range_its_change_and_interval(capsys, sets) -> None:
    code, _, err = compare(capsys, sets["base"], sets["slow"], "--fail-on", "5%")
    assert code == 3
    assert err.startswith("recfn: 1 range got slower by more than 5.0%")
    assert "load +" in err and "[+" in err


def test_fail_on_passes_below_the_threshold(capsys, sets) -> None:
    code, _, err = compare(capsys, sets["base"], sets["slow"], "--fail-on", "20%")
    assert code == 0 and err == ""


def test_fail_on_passes_an_a_a_comparison(capsys, sets) -> None:
    code, _, _ = compare(capsys, sets["base"], sets["same"], "--fail-on", "0.02")
    assert code == 0


def test_min_share_leaves_small_ranges_out_of_the_gate(capsys, sets) -> None:
    # load is about 15% of the run
    code, _, _ = compare(
        capsys, sets["base"], sets["slow"], "--fail-on", "5%", "--min-share", "30%"
    )
    assert code == 0


def test_several_run_sets_report_the_first_step(capsys, sets) -> None:
    code, out, _ = compare(capsys, sets["base"], sets["same"], sets["slow"], sets["later"])
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("load "))
    assert sets["slow"] in line and "slower" in line


def test_steps_gate_on_a_slower_step(capsys, sets) -> None:
    code, _, err = compare(capsys, sets["base"], sets["slow"], sets["later"], "--fail-on", "5%")
    assert code == 3
    assert "load" in err and sets["slow"] in err


def test_steps_as_json(capsys, sets) -> None:
    _, out, _ = compare(capsys, sets["base"], sets["same"], sets["slow"], "--format", "json")
    found = json.loads(out)
    assert found["run_sets"] == [sets["base"], sets["same"], sets["slow"]]
    assert {row["name"]: row["step"] for row in found["rows"]}["load"] == sets["slow"]


@pytest.mark.parametrize("value", ["5", "five", "200%"])
def test_a_bad_threshold_is_a_usage_error(capsys, sets, value: str) -> None:
    code, out, err = compare(capsys, sets["base"], sets["slow"], "--fail-on", value)
    assert code == 2 and out == ""
    assert err.startswith("recfn: error: --fail-on")


def test_a_missing_candidate_names_only_what_is_required(capsys, sets) -> None:
    code, out, err = compare(capsys, sets["base"])
    assert code == 2 and out == ""
    assert "required: candidate (" in err, err


def test_a_baseline_without_traces_is_one_line(capsys, sets, tmp_path: Path) -> None:
    code, _, err = compare(capsys, str(tmp_path), sets["slow"])
    assert code == 1
    assert err.count("\n") == 1 and "baseline: no trace files" in err


def test_different_workloads_are_one_line_naming_them(capsys, sets, tmp_path: Path) -> None:
    other = run_set(tmp_path / "other", 3, 0)
    for name in Path(other).iterdir():
        frame = Trace.from_pandas(pd.read_parquet(name)).to_pandas()
        frame["name"] = frame["name"].astype(str) + "_x"
        Trace.from_pandas(frame).save(name, overwrite=True)
    code, _, err = compare(capsys, sets["base"], other)
    assert code == 1
    assert err.startswith("recfn: error: compare: the run sets share no name")
    assert "load_x" in err


def test_a_tampered_run_is_refused_as_recfn_load_refuses_it(capsys, sets, tmp_path: Path) -> None:
    """Runs are read out of core through the summary's verified path: a value altered after
    recfn wrote the file fails its content hash, one line naming the file, no traceback."""
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    for name in sorted(os.listdir(sets["same"])):
        table = pq.read_table(os.path.join(sets["same"], name))
        if name == "run-0002.parquet":
            start = table.column("start_ns").to_numpy().copy()
            start[3] += 448
            index = table.schema.get_field_index("start_ns")
            table = table.set_column(index, "start_ns", pa.array(start, pa.int64()))
        pq.write_table(table, tampered / name, store_schema=True)
    code, out, err = compare(capsys, sets["base"], str(tampered))
    assert code == 1 and out == ""
    assert "run-0002.parquet" in err and "content hash mismatch in column 'start_ns'" in err
    assert "Traceback" not in err


def test_the_command_shows_in_the_help() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "recfn", "--help"], capture_output=True, text=True, timeout=60
    )
    assert "compare" in proc.stdout


# -- recfn run --repeat ----------------------------------------------------------------------


SCRIPT = """
import sys
import recfn
with recfn.record_function("work"):
    sum(range(1000))
print("ran with", sys.argv[1:])
"""


def test_run_repeat_records_one_dataset_per_run_and_numbers_on(
    tmp_path: Path, checkout_env: dict[str, str]
) -> None:
    script = tmp_path / "work.py"
    script.write_text(textwrap.dedent(SCRIPT))

    def repeat(count: int) -> subprocess.CompletedProcess[str]:
        command = ["run", "--repeat", str(count), "-o", "runs/", "work.py", "--flag"]
        return subprocess.run(
            [sys.executable, "-m", "recfn", *command],
            cwd=tmp_path,
            env=checkout_env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    first = repeat(2)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("ran with ['--flag']") == 2
    assert repeat(1).returncode == 0
    runs = sorted(os.listdir(tmp_path / "runs"))
    assert runs == ["run-0001", "run-0002", "run-0003"]
    parts = list((tmp_path / "runs" / "run-0003").rglob("part-*.parquet"))
    assert parts and "work" in set(pd.read_parquet(parts[0])["name"].astype(str))


def test_run_repeat_runs_a_module_as_python_m_does(
    tmp_path: Path, checkout_env: dict[str, str]
) -> None:
    (tmp_path / "workmod.py").write_text(textwrap.dedent(SCRIPT))
    command = ["run", "--repeat", "2", "-o", "runs/", "-m", "workmod", "--flag"]
    done = subprocess.run(
        [sys.executable, "-m", "recfn", *command],
        cwd=tmp_path,
        env=checkout_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("ran with ['--flag']") == 2
    assert sorted(os.listdir(tmp_path / "runs")) == ["run-0001", "run-0002"]


def test_run_repeat_of_a_missing_module_says_so_before_any_run(capsys, tmp_path: Path) -> None:
    code = main(["run", "--repeat", "2", "-o", str(tmp_path / "runs") + "/", "-m", "no_such_mod"])
    assert code == 1
    assert "no module named 'no_such_mod'" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_run_repeat_needs_a_folder(capsys, tmp_path: Path) -> None:
    script = tmp_path / "work.py"
    script.write_text("pass\n")
    code = main(["run", "--repeat", "2", "-o", str(tmp_path / "one.parquet"), str(script)])
    assert code == 2
    assert "--repeat needs -o FOLDER/" in capsys.readouterr().err
