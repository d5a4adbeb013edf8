"""Run comparisons (``recfn.compare``): the statistics on synthetic run sets with planted effects
and known noise (fixed seeds, no real time), the run-set reading, and bad input."""

from __future__ import annotations

import dataclasses
import json
import math
from io import StringIO
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import recfn
from recfn.analysis.outofcore.files import run_stats
from recfn.analysis.runsets import compare, compare_steps, parse_percent, read_runs
from recfn.analysis.stats.compare import (
    CALLS,
    FASTER,
    NOT_ENOUGH,
    RUNS,
    SLOWER,
    UNCHANGED,
    compare_runs,
    degrees_of_freedom,
    time_separation,
)
from recfn.analysis.stats.runs import frame_stats
from recfn.analysis.synthetic import make_synthetic_run
from recfn.errors import (
    RecfnTypeError,
    RecfnValueError,
    RunSetError,
    TraceFormatError,
    TraceNotFoundError,
)
from recfn.formats.trace import Trace

LEAVES = ("load", "layer", "backward", "optimizer", "log")


def runs(count: int, first_seed: int, **options: object) -> list[pd.DataFrame]:
    return [make_synthetic_run(first_seed + i, **options) for i in range(count)]  # type: ignore[arg-type]


def stats(frames: list[pd.DataFrame], keep_calls: bool = False) -> list:
    return [frame_stats(frame, keep_calls=keep_calls) for frame in frames]


@pytest.fixture(scope="module")
def baseline() -> list:
    return stats(runs(10, 0))


@pytest.fixture(scope="module")
def same_code() -> list:
    return stats(runs(10, 100))


def save_runs(folder: Path, frames: list[pd.DataFrame]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, frame in enumerate(frames):
        Trace.from_pandas(frame).save(folder / f"run-{i:04d}.parquet")
    return folder


# -- the statistics --------------------------------------------------------------------------


def test_an_a_a_comparison_finds_every_name_unchanged(baseline: list, same_code: list) -> None:
    result = compare_runs(baseline, same_code)
    assert result.method == RUNS
    assert set(result.table["verdict"]) == {UNCHANGED}


def test_a_planted_slowdown_is_found_with_an_interval_around_it(baseline: list) -> None:
    slower = stats(runs(10, 200, slowdown={"load": 1.10}))
    row = compare_runs(baseline, slower).table.loc["load"]
    assert row["verdict"] == SLOWER
    assert row["change_low"] < 0.10 < row["change_high"]


def test_names_the_slowdown_did_not_touch_stay_unchanged(baseline: list) -> None:
    slower = stats(runs(10, 200, slowdown={"load": 1.10}))
    verdicts = compare_runs(baseline, slower).table["verdict"]
    assert set(verdicts[["layer", "backward", "optimizer", "log"]]) == {UNCHANGED}


def test_a_planted_speedup_is_faster(baseline: list) -> None:
    faster = stats(runs(10, 300, slowdown={"backward": 0.85}))
    row = compare_runs(baseline, faster).table.loc["backward"]
    assert row["verdict"] == FASTER
    assert row["change_low"] < -0.15 < row["change_high"]


def test_a_5_percent_slowdown_of_a_fifth_of_the_run_is_found_at_10_runs(baseline: list) -> None:
    slower = stats(runs(10, 400, slowdown={"layer": 1.05}))
    assert compare_runs(baseline, slower).table.loc["layer", "verdict"] == SLOWER


def test_preempted_calls_do_not_make_a_verdict(baseline: list) -> None:
    # A fifth of the leaf calls lose 3 ms to another process: their sums swing, their medians
    # do not. (A step holds nine leaf calls, so most steps are hit: their median moves.)
    noisy = stats(runs(10, 500, preempt=0.2))
    result = compare_runs(baseline, noisy)
    assert set(result.table.loc[list(LEAVES), "verdict"]) == {UNCHANGED}


def test_a_slower_machine_is_the_common_shift_not_a_name() -> None:
    base = stats(runs(10, 0, run_noise=0.0))
    # every range's own work 20% more: as if the machine were slower
    everything = {name: 1.2 for name in LEAVES}
    cand = stats(runs(10, 600, run_noise=0.0, slowdown=everything))
    result = compare_runs(base, cand)
    assert set(result.table.loc[list(LEAVES), "verdict"]) == {UNCHANGED}
    assert result.shift.verdict == SLOWER
    # a leaf's duration is its work (20% more) and a fixed 2 us gap: a little under 20%
    assert result.shift.change == pytest.approx(0.2, abs=0.01)


def test_the_a_a_false_positive_rate_stays_within_the_confidence() -> None:
    # 40 A/A comparisons of 5 runs per side from 400 runs of one noise model: at 99%
    # family-wise confidence, at most one may flag a name (expected 0.4).
    pool = stats(runs(400, 1000, run_noise=0.08, preempt=0.05))
    flagged = 0
    for rep in range(40):
        sides = pool[10 * rep : 10 * rep + 5], pool[10 * rep + 5 : 10 * rep + 10]
        verdicts = compare_runs(*sides, seed=rep).table["verdict"]
        flagged += bool(verdicts.isin([SLOWER, FASTER]).any())
    assert flagged <= 1


# -- the order runs were recorded in -----------------------------------------------------


SECOND: int = 10**9
CLOCK: int = 1_700_000_000 * SECOND  # 2023, on the wall clock


def timed(runs: list, places: list[int], *, length: int = SECOND // 2, at: int = CLOCK) -> list:
    """The runs, each given a span: the ``places[i]``-th second from ``at``."""
    return [
        dataclasses.replace(run, span_ns=(at + place * SECOND, at + place * SECOND + length))
        for run, place in zip(runs, places)
    ]


def test_one_block_after_the_other_is_fully_apart(baseline: list, same_code: list) -> None:
    assert (
        time_separation(timed(baseline, list(range(10))), timed(same_code, list(range(10, 20))))
        == 1.0
    )
    assert (
        time_separation(timed(baseline, list(range(10, 20))), timed(same_code, list(range(10))))
        == 1.0
    )


def test_runs_taking_turns_are_one_turn_apart(baseline: list, same_code: list) -> None:
    base = timed(baseline, list(range(0, 20, 2)))
    cand = timed(same_code, list(range(1, 20, 2)))
    assert time_separation(base, cand) == pytest.approx(0.1)  # 1/n for n turns each
    half = timed(same_code, [1, 3, *range(20, 28)])  # two turns, then a block: 0.66
    assert 0.5 < time_separation(base, half) < 1.0
    assert "partly interleaved" in compare_runs(base, half).describe()


@pytest.mark.parametrize(
    "why",
    ["a run without a span", "times counted from 0, not the clock", "runs overlapping in time"],
)
def test_an_unknown_order_counts_as_one_block_after_the_other(
    baseline: list, same_code: list, why: str
) -> None:
    base = timed(baseline, list(range(0, 20, 2)))
    cand = timed(same_code, list(range(1, 20, 2)))
    if why == "a run without a span":
        cand[3] = dataclasses.replace(cand[3], span_ns=None)
    elif why == "times counted from 0, not the clock":
        base, cand = (
            timed(baseline, list(range(0, 20, 2)), at=0),
            timed(same_code, list(range(1, 20, 2)), at=0),
        )
    else:
        cand = timed(same_code, list(range(1, 20, 2)), length=3 * SECOND // 2)
    assert time_separation(base, cand) == 1.0


def test_runs_taken_in_turns_drop_the_drift_between_blocks(baseline: list) -> None:
    slower = stats(runs(10, 400, slowdown={"layer": 1.05}))
    blocks = compare_runs(timed(baseline, list(range(10))), timed(slower, list(range(10, 20))))
    turns = compare_runs(
        timed(baseline, list(range(0, 20, 2))), timed(slower, list(range(1, 20, 2)))
    )
    assert (blocks.separation, turns.separation) == (1.0, pytest.approx(0.1))
    width = {
        name: (found.table["change_high"] - found.table["change_low"]).dropna()
        for name, found in (("blocks", blocks), ("turns", turns))
    }
    assert (width["turns"] < width["blocks"]).all()  # the same runs: drift term and freedom differ
    assert turns.table.loc["layer", "verdict"] == SLOWER
    assert "in turns" in turns.describe() and "in turns" not in blocks.describe()
    assert turns.to_dict()["separation"] == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("runs", "separation", "expected"),
    [
        ((10, 10), 1.0, 9),  # blocks: the smaller side's runs - 1
        ((10, 10), 0.0, 18),  # turns: both sides' runs - 2, pooled
        ((10, 10), 0.1, 17),  # ten strict turns each
        ((5, 10), 1.0, 4),
        ((5, 10), 0.0, 13),
        ((10, 10), 0.5, 14),  # in proportion between
    ],
)
def test_degrees_of_freedom_pool_the_sides_as_far_as_they_took_turns(
    runs: tuple[int, int], separation: float, expected: int
) -> None:
    assert degrees_of_freedom(*runs, separation) == expected


def test_turns_pool_the_degrees_of_freedom_of_both_sides(baseline: list, same_code: list) -> None:
    blocks = compare_runs(timed(baseline, list(range(10))), timed(same_code, list(range(10, 20))))
    turns = compare_runs(
        timed(baseline, list(range(0, 20, 2))), timed(same_code, list(range(1, 20, 2)))
    )
    assert (blocks.freedom, turns.freedom) == (9, 17)
    assert turns.to_dict()["degrees_of_freedom"] == 17


def test_the_same_seed_gives_the_same_table(baseline: list, same_code: list) -> None:
    first = compare_runs(baseline, same_code, seed=7).table
    second = compare_runs(baseline, same_code, seed=7).table
    pd.testing.assert_frame_equal(first, second)


def test_one_run_per_side_bootstraps_over_calls_and_says_so() -> None:
    base = stats(runs(1, 0, steps=60), keep_calls=True)
    cand = stats(runs(1, 1, steps=60, slowdown={"load": 1.25}), keep_calls=True)
    result = compare_runs(base, cand)
    assert result.method == CALLS
    assert result.table.loc["load", "verdict"] == SLOWER
    assert result.shift.verdict == NOT_ENOUGH
    assert any("over the calls" in note for note in result.notes)


def test_too_few_runs_are_not_enough_data() -> None:
    result = compare_runs(stats(runs(2, 0)), stats(runs(2, 10)))
    assert set(result.table["verdict"]) == {NOT_ENOUGH}
    assert result.table["change"].isna().all()


def test_a_name_on_one_side_only_is_not_enough_data(baseline: list) -> None:
    extra = runs(10, 700)
    for frame in extra:
        frame["name"] = frame["name"].cat.rename_categories({"log": "log_v2"})
    table = compare_runs(baseline, stats(extra)).table
    assert table.loc["log", "verdict"] == NOT_ENOUGH
    assert table.loc["log_v2", "verdict"] == NOT_ENOUGH
    assert table.loc["log_v2", "runs_baseline"] == 0


def test_shares_are_fractions_of_the_workload(baseline: list, same_code: list) -> None:
    table = compare_runs(baseline, same_code).table
    assert table.loc["step", "share"] == pytest.approx(1.0)
    assert 0.15 < table.loc["layer", "share"] < 0.35


def test_the_table_holds_both_sides_per_run_and_per_call(baseline: list, same_code: list) -> None:
    row = compare_runs(baseline, same_code).table.loc["layer"]
    assert row["calls_baseline"] == row["calls_candidate"] == 80
    assert row["call_ns_baseline"] == pytest.approx(100_000, rel=0.1)
    assert row["total_ns_candidate"] > 80 * 90_000
    assert row["total_iqr_ns_baseline"] >= 0


def test_regressions_keep_slower_names_over_the_threshold_and_floor(baseline: list) -> None:
    slower = stats(runs(10, 200, slowdown={"load": 1.10, "log": 1.30}))
    result = compare_runs(baseline, slower)
    assert "load" in result.regressions(0.05).index
    assert "load" not in result.regressions(0.20).index
    assert "log" in result.regressions(0.05).index
    assert "log" not in result.regressions(0.05, min_share=0.05).index  # log is ~3%


@pytest.mark.parametrize(
    "options",
    [{"confidence": 1.0}, {"min_change": -0.1}, {"resamples": 10}, {"min_runs": 1}],
    ids=["confidence", "min_change", "resamples", "min_runs"],
)
def test_bad_options_are_refused_by_name(baseline: list, options: dict) -> None:
    name = next(iter(options))
    with pytest.raises(RecfnValueError, match=name):
        compare_runs(baseline, baseline, **options)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"confidence": "x"}, RecfnTypeError),
        ({"confidence": None}, RecfnTypeError),
        ({"min_change": "5%"}, RecfnTypeError),
        ({"resamples": 200.0}, RecfnTypeError),
        ({"seed": "1"}, RecfnTypeError),
        ({"min_calls": True}, RecfnTypeError),
        ({"threads": "2"}, RecfnTypeError),
        ({"confidence": 1.0}, RecfnValueError),
        ({"seed": -1}, RecfnValueError),
    ],
    ids=["confidence", "no-confidence", "min_change", "resamples", "seed", "min_calls",
         "threads", "confidence-range", "seed-range"],
)  # fmt: skip
def test_bad_options_are_refused_before_any_run_is_read(
    tmp_path: Path, options: dict, error: type
) -> None:
    """The run sets do not exist: what is refused is the option, before reading them."""
    name = next(iter(options))
    missing = tmp_path / "no-such-runs"
    with pytest.raises(error, match=name):
        recfn.compare(missing, missing, **options)
    with pytest.raises(error, match=name):
        compare_steps([missing, missing], **options)


def test_finding_steps_names_an_option_it_does_not_have(tmp_path: Path) -> None:
    with pytest.raises(RecfnTypeError, match=r"no option\(s\) \['confidense'\]"):
        compare_steps([tmp_path, tmp_path], confidense=0.9)


# -- renderings -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def planted(baseline: list):
    return compare_runs(baseline, stats(runs(10, 200, slowdown={"load": 1.10})))


def test_the_text_table_has_a_row_per_name_and_the_common_shift(planted) -> None:
    text = planted.to_text()
    assert "load" in text and "slower" in text
    assert "common shift" in text
    assert "bootstrap over runs" in text


def test_json_holds_every_row_with_plain_values(planted) -> None:
    found = json.loads(planted.to_json())
    assert found["method"] == RUNS
    rows = {row["name"]: row for row in found["rows"]}
    assert rows["load"]["verdict"] == SLOWER
    assert rows["load"]["change_low"] > 0


def test_csv_holds_every_column(planted) -> None:
    frame = pd.read_csv(StringIO(planted.to_csv()))
    assert set(frame["name"]) == set(planted.table.index)
    assert {"change", "change_low", "change_high", "verdict", "share"} <= set(frame.columns)


def test_markdown_is_a_table_with_a_row_per_name(planted) -> None:
    lines = [line for line in planted.to_markdown().splitlines() if line.startswith("|")]
    assert len(lines) == 2 + len(planted.table)
    assert any(line.startswith("| load |") and "slower" in line for line in lines)


# -- steps -----------------------------------------------------------------------------------


def test_steps_name_the_first_set_where_a_name_changed() -> None:
    sets = [
        stats(runs(8, 0)),
        stats(runs(8, 100)),
        stats(runs(8, 200, slowdown={"load": 1.15})),
        stats(runs(8, 300, slowdown={"load": 1.15})),
    ]
    from recfn.analysis.stats.compare import find_steps

    table = find_steps(sets, ["c1", "c2", "c3", "c4"])
    assert table.loc["load", "step"] == "c3"
    assert table.loc["load", "verdict"] == SLOWER
    assert pd.isna(table.loc["backward", "step"])
    assert table.loc["backward", "verdict"] == UNCHANGED


# -- run sets --------------------------------------------------------------------------------


def test_a_folder_of_runs_is_a_run_set(tmp_path: Path) -> None:
    base = save_runs(tmp_path / "base", runs(4, 0))
    cand = save_runs(tmp_path / "cand", runs(4, 50, slowdown={"load": 1.3}))
    result = recfn.compare(base, cand)
    assert result.runs == (4, 4)
    assert result.labels == ("base", "cand")
    assert result.table.loc["load", "verdict"] == SLOWER


def test_the_out_of_core_statistics_equal_the_in_memory_ones(tmp_path: Path) -> None:
    frame = runs(1, 3)[0]
    path = tmp_path / "run.parquet"
    Trace.from_pandas(frame).save(path)
    out_of_core = run_stats([str(path)], ["name"], keep_calls=True)
    in_memory = frame_stats(frame, keep_calls=True)
    pd.testing.assert_frame_equal(
        out_of_core.table.set_index("name").sort_index(),
        in_memory.table.set_index("name").sort_index(),
        check_dtype=False,
    )
    assert out_of_core.workload_ns == in_memory.workload_ns
    assert out_of_core.span_ns == in_memory.span_ns
    closed = frame["end_ns"].notna() & (frame["kind"] == "range")
    assert in_memory.span_ns == (
        int(frame["start_ns"][closed].min()),
        int(frame["end_ns"][closed].max()),
    )
    np.testing.assert_array_equal(
        out_of_core.calls[("load",)].durations, in_memory.calls[("load",)].durations
    )


def test_dataset_folders_are_runs_and_a_dataset_is_one_run(tmp_path: Path) -> None:
    for i, frame in enumerate(runs(3, 0)):
        folder = tmp_path / "runs" / f"run-{i + 1:04d}" / "hostname=h" / "process=1"
        folder.mkdir(parents=True)
        Trace.from_pandas(frame).save(folder / "part-00000.parquet")
    assert [run.label for run in read_runs(tmp_path / "runs")] == [
        "run-0001",
        "run-0002",
        "run-0003",
    ]
    assert len(read_runs(tmp_path / "runs" / "run-0002")) == 1


def test_a_glob_and_a_list_are_run_sets(tmp_path: Path) -> None:
    save_runs(tmp_path / "base", runs(3, 0))
    assert len(read_runs(str(tmp_path / "base" / "*.parquet"))) == 3
    frames = runs(2, 0)
    assert [run.frame is not None for run in read_runs(frames)] == [True, True]


def test_a_trace_and_a_frame_compare_through_their_methods() -> None:
    base, cand = runs(1, 0, steps=40), runs(1, 1, steps=40, slowdown={"load": 1.3})[0]
    by_frame = cand.recfn.compare(base[0])
    by_trace = Trace.from_pandas(cand).compare(base)
    assert by_frame.table.loc["load", "verdict"] == SLOWER
    pd.testing.assert_frame_equal(by_frame.table, by_trace.table)


def test_compare_groups_by_any_column() -> None:
    base = runs(4, 0)
    cand = runs(4, 10)
    result = compare(base, cand, by=["thread_name", "name"])
    assert result.table.index.names == ["thread_name", "name"]
    assert ("MainThread", "load") in result.table.index


def test_per_path_comparison_names_call_paths() -> None:
    result = compare(runs(4, 0), runs(4, 10, slowdown={"layer": 1.3}), paths=True)
    assert result.paths is not None
    assert result.paths.table.loc["step;forward;layer", "verdict"] == SLOWER


# -- bad input ---------------------------------------------------------------------------------


def test_run_sets_without_a_common_name_are_refused_naming_both(tmp_path: Path) -> None:
    other = runs(3, 0)
    for frame in other:
        frame["name"] = frame["name"].cat.rename_categories(lambda n: f"other_{n}")
    with pytest.raises(RunSetError, match="share no name") as info:
        compare(runs(3, 0), other, labels=("main", "branch"))
    assert "main has" in str(info.value) and "other_" in str(info.value)


def test_a_baseline_folder_without_traces_is_refused_naming_the_side(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no traces here")
    with pytest.raises(TraceNotFoundError, match="baseline: no trace files"):
        compare(tmp_path / "empty", runs(1, 0))


def test_a_missing_path_is_refused_naming_the_side(tmp_path: Path) -> None:
    with pytest.raises(TraceNotFoundError, match="candidate: no such file"):
        compare(runs(1, 0), tmp_path / "nowhere")


def rewrite_version(path: Path, version: str) -> None:
    table = pq.read_table(path)
    metadata = dict(table.schema.metadata or {})
    metadata[b"recfn.schema_version"] = version.encode()
    metadata.pop(b"recfn.content_hash", None)
    pq.write_table(table.replace_schema_metadata(metadata), path)


def test_mismatched_schema_versions_are_refused_naming_them(tmp_path: Path) -> None:
    base = save_runs(tmp_path / "base", runs(3, 0))
    cand = save_runs(tmp_path / "cand", runs(3, 10))
    rewrite_version(cand / "run-0001.parquet", "0")
    with pytest.raises(RunSetError, match="different schema versions") as info:
        compare(base, cand)
    message = str(info.value)
    assert "version 0" in message and "version 1" in message and "run-0001.parquet" in message


def test_a_newer_schema_version_is_a_format_error(tmp_path: Path) -> None:
    cand = save_runs(tmp_path / "cand", runs(3, 10))
    rewrite_version(cand / "run-0000.parquet", "99")
    with pytest.raises(TraceFormatError, match="newer than this recfn"):
        compare(runs(3, 0), cand)


def test_a_file_that_is_not_a_trace_is_a_format_error(tmp_path: Path) -> None:
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(TraceFormatError):
        compare(tmp_path / "bad.parquet", runs(1, 0))


def test_something_that_is_not_a_run_set_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="a run set is"):
        compare(42, runs(1, 0))


@pytest.mark.parametrize(
    ("text", "value"), [("5%", 0.05), ("0.05", 0.05), ("12.5%", 0.125), ("0%", 0.0)]
)
def test_percentages_read_as_fractions(text: str, value: float) -> None:
    assert math.isclose(parse_percent(text, "--fail-on"), value)


@pytest.mark.parametrize("text", ["5", "five", "150%", "-1%"])
def test_bad_percentages_are_refused_naming_the_option(text: str) -> None:
    with pytest.raises(RecfnValueError, match="--fail-on"):
        parse_percent(text, "--fail-on")


def test_steps_need_two_run_sets() -> None:
    with pytest.raises(RunSetError, match="two run sets"):
        compare_steps([runs(1, 0)])
    for one in ("runs/", 5):  # a folder's name would be run sets of one letter each
        with pytest.raises(TypeError, match="a list of run sets in order"):
            compare_steps(one)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("p", "freedom", "expected"),
    [(0.975, 1, 12.7062), (0.975, 2, 4.3027), (0.975, 3, 3.1824), (0.995, 9, 3.2498),
     (0.975, 19, 2.0930), (0.975, 0, 1.9600)],
)  # fmt: skip
def test_student_quantiles_match_the_tables(p: float, freedom: int, expected: float) -> None:
    from recfn.analysis.stats.compare import _t_quantile

    assert _t_quantile(p, freedom) == pytest.approx(expected, rel=2e-3)


def test_a_change_within_the_run_to_run_spread_is_not_a_verdict(
    baseline: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The noise floor: however narrow the interval, a change smaller than a name's run-to-run
    spread stays unchanged (the floor raised far above a planted 10% slowdown)."""
    from recfn.analysis.stats import compare as module

    candidate = stats(runs(10, 500, slowdown={"load": 1.10}))
    assert compare_runs(baseline, candidate).table.loc["load", "verdict"] == SLOWER
    monkeypatch.setattr(module, "NOISE_FLOOR", 1000.0)
    assert compare_runs(baseline, candidate).table.loc["load", "verdict"] == UNCHANGED


def test_drift_between_the_blocks_of_runs_is_not_a_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two blocks of 20 runs of the same code, recorded one after the other on a machine that
    drifted: `optimizer` takes 2% more in the candidate's block, about twice its run-to-run
    spread. Within each block the runs agree, so the bootstrap alone calls it slower; the drift
    term (`DRIFT` x the run-to-run spread in each interval) keeps it unchanged."""
    from recfn.analysis.stats import compare as module

    base = stats(runs(20, 0, call_noise=0.04))
    drifted = stats(runs(20, 800, call_noise=0.04, slowdown={"optimizer": 1.02}))
    verdicts = compare_runs(base, drifted).table["verdict"]
    assert set(verdicts) == {UNCHANGED}
    monkeypatch.setattr(module, "DRIFT", 0.0)
    assert compare_runs(base, drifted).table.loc["optimizer", "verdict"] == SLOWER


def test_one_run_gone_wild_in_one_name_does_not_move_its_change(
    baseline: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One candidate run of ten has `load` 40% slower (something else ran then): the trimmed
    mean over runs (`RUN_TRIM`) leaves that run out of `load`'s change; a plain mean would take
    a tenth of it in."""
    from recfn.analysis.stats import compare as module

    candidate = stats(runs(9, 100) + runs(1, 109, slowdown={"load": 1.4}))
    row = compare_runs(baseline, candidate).table.loc["load"]
    assert row["verdict"] == UNCHANGED
    assert abs(row["change"]) < 0.005
    monkeypatch.setattr(module, "RUN_TRIM", 0.0)
    assert compare_runs(baseline, candidate).table.loc["load", "change"] > 0.03


@pytest.mark.parametrize(
    ("values", "trim", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0, 100.0], 0.2, 3.0),  # one value dropped from each end
        ([1.0, 2.0, 3.0, 4.0], 0.2, 2.5),  # 20% of 4 rounds down to none
        ([1.0, 2.0, np.nan, 3.0, 50.0, 4.0], 0.2, 3.0),  # NaN left out: five values
        ([1.0, 2.0, 3.0, 4.0, 100.0], 0.5, 3.0),  # the median
        ([np.nan, np.nan], 0.2, math.nan),
    ],
)
def test_a_sides_value_is_the_trimmed_mean_of_its_runs(
    values: list, trim: float, expected: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recfn.analysis.stats import compare as module

    monkeypatch.setattr(module, "RUN_TRIM", trim)
    found = module._location(np.array(values)[:, None])[0]
    assert found == pytest.approx(expected, nan_ok=True)


def test_runs_are_read_on_the_cores_and_a_bad_thread_count_is_refused(tmp_path: Path) -> None:
    from recfn.analysis.outofcore.files import MAX_DEFAULT_THREADS, worker_threads

    assert 1 <= worker_threads(None) <= MAX_DEFAULT_THREADS
    assert worker_threads(7) == 7
    with pytest.raises(RecfnValueError, match="threads must be >= 1, got 0"):
        worker_threads(0)
    with pytest.raises(RecfnValueError, match="threads must be >= 1, got 0"):
        recfn.compare(tmp_path / "base", tmp_path / "cand", threads=0)
