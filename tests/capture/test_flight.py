"""The flight recorder: ``profile(flight_recorder=N)`` keeps the last N events and writes them,
complete and valid, on an escaping exception, on SIGUSR1 and on demand."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recfn
from recfn.capture._flight import SPILL_ROWS, dump_in_background
from recfn.cli import main
from recfn.formats import schema

REPO = Path(__file__).resolve().parents[2]


def facts(trace: recfn.Trace) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(trace.metadata[schema.FLIGHT_RECORDER_KEY])
    return value


def names(trace: recfn.Trace) -> list[str]:
    return [str(n) for n in trace.table.column("name").to_pylist()]


# An operation: open a range, close the innermost open one, or mark.
OPS = st.lists(st.sampled_from(["open", "close", "mark"]), max_size=60)


@settings(max_examples=60, deadline=None)
@given(ops=OPS, capacity=st.integers(1, 25))
def test_the_dump_is_the_last_n_events_and_the_open_ranges(ops: list[str], capacity: int) -> None:
    created = ["__start_profile"]  # every event, in the order it was recorded
    parent_of: dict[str, str] = {}
    stack: list[tuple[str, recfn.record_function]] = []
    with recfn.profile(flight_recorder=capacity) as prof:
        for i, op in enumerate(ops):
            if op == "close":
                if stack:
                    stack.pop()[1].__exit__(None, None, None)
                continue
            name = f"e{i}"
            created.append(name)
            if stack:
                parent_of[name] = stack[-1][0]
            if op == "mark":
                recfn.mark(name)
            else:
                rf = recfn.record_function(name)
                rf.__enter__()
                stack.append((name, rf))
        still_open = [name for name, _ in stack]
        dump = prof.dump()
        for _, rf in reversed(stack):
            rf.__exit__(None, None, None)

    expected = set(created[-capacity:]) | set(still_open)
    got = names(dump)
    assert sorted(got) == sorted(expected)
    schema.check_events(dump.table, "dump")  # complete: no parent dangles
    df = dump.to_pandas()
    by_name = df.set_index(df["name"].astype(str))
    ids = dict(zip(by_name.index, by_name["id"]))
    cut = 0
    for name in got:
        parent = parent_of.get(name)
        recorded = by_name.loc[name, "parent_id"]
        if parent in expected:
            assert recorded == ids[parent]
        else:
            assert pd_isna(recorded)
            cut += parent is not None
        assert pd_isna(by_name.loc[name, "end_ns"]) == (name in still_open)
    assert facts(dump) == {
        "reason": "demand",
        "capacity": capacity,
        "discarded": len(created) - len(got),
        "cut_parents": cut,
        "open_ranges": len(still_open),
    }


def pd_isna(value: Any) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def test_the_ring_holds_n_events_plus_a_buffer_while_recording_goes_past_spills() -> None:
    capacity, steps = 1_000, 3 * SPILL_ROWS
    retained = []
    with recfn.profile(flight_recorder=capacity) as prof:
        with recfn.record_function("outer"):
            for i in range(steps):
                with recfn.record_function("step"):
                    pass
                if i % 10_000 == 0:
                    retained.append(prof._ring.retained)
            dump = prof.dump()
    assert max(retained) <= capacity + SPILL_ROWS + 2  # + the open range and one mark
    assert dump.events == capacity + 1  # and "outer", still open then
    df = dump.to_pandas()
    outer = df[df["name"] == "outer"]
    assert outer["end_ns"].isna().all()
    steps_df = df[df["name"] == "step"]
    assert (steps_df["parent_id"] == outer["id"].iloc[0]).all()  # kept parent: not cut
    assert facts(dump)["cut_parents"] == 0
    assert facts(dump)["discarded"] == 1 + steps - capacity  # __start_profile and old steps
    final = prof.trace  # at stop: the last N, outer now closed and older than all of them
    assert names(final) == ["step"] * (capacity - 1) + ["__stop_profile"]
    assert final.table.column("parent_id").null_count == capacity


def test_threads_share_one_ring_bounded_by_n_plus_a_buffer_each() -> None:
    capacity = 5_000
    barrier = threading.Barrier(2)
    peaks: list[int] = []

    def work(prof: recfn.profile, name: str) -> None:
        barrier.wait()
        for i in range(2 * SPILL_ROWS):
            with recfn.record_function(name):
                pass
            if i % 20_000 == 0:
                peaks.append(prof._ring.retained)

    with recfn.profile(flight_recorder=capacity) as prof:
        threads = [threading.Thread(target=work, args=(prof, f"t{k}")) for k in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert max(peaks) <= capacity + 2 * SPILL_ROWS + 1
    trace = prof.trace
    assert trace.events == capacity
    assert facts(trace)["discarded"] == 2 * 2 * SPILL_ROWS + 2 - capacity


def test_an_escaping_exception_writes_the_dump_to_output(tmp_path: Path) -> None:
    out = tmp_path / "crash.parquet"
    with pytest.raises(ValueError, match="boom"):
        with recfn.profile(flight_recorder=3, output=out) as prof:
            for i in range(5):
                recfn.mark(f"m{i}")
            raise ValueError("boom")
    trace = recfn.load(out)
    assert names(trace) == ["m3", "m4", "__stop_profile"]
    assert facts(trace)["reason"] == "exception: ValueError: boom"
    assert prof.dumps == [str(out)]


def test_without_output_an_exception_dumps_into_the_current_folder_and_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.warns(RuntimeWarning, match="flight recorder wrote its last 2 events"):
        with pytest.raises(KeyError):
            with recfn.profile(flight_recorder=2):
                raise KeyError("k")
    (dump,) = tmp_path.glob("recfn-flight-*.parquet")
    assert dump.name == f"recfn-flight-{os.getpid()}.parquet"
    assert facts(recfn.load(dump))["reason"] == "exception: KeyError: 'k'"


def test_a_clean_exit_writes_nothing_without_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        with recfn.profile(flight_recorder=2) as prof:
            sys.exit(0)
    assert not list(tmp_path.iterdir()) and prof.dumps == []
    assert facts(prof.trace)["reason"] == "stop"


def test_dump_on_demand_while_recording_goes_on(tmp_path: Path) -> None:
    first = tmp_path / "now.json"  # by suffix, as save()
    with recfn.profile(flight_recorder=4) as prof:
        with recfn.record_function("open"):
            recfn.mark("a")
            dump = prof.dump(first)
            recfn.mark("b")
    assert names(dump) == ["__start_profile", "open", "a"]
    assert names(recfn.load(first)) == names(dump)
    assert names(prof.trace) == ["open", "a", "b", "__stop_profile"]
    with pytest.raises(RuntimeError, match="flight_recorder"):
        with recfn.profile() as plain:
            plain.dump()


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="flight_recorder must be positive"):
        recfn.profile(flight_recorder=0)
    with pytest.raises(ValueError, match="needs output="):
        recfn.profile(flight_recorder=5, output="x.parquet", follow_children=True)


SIGNAL_CHILD = textwrap.dedent(
    """
    import json, os, signal, sys
    import recfn

    calls = []
    signal.signal(signal.SIGUSR1, lambda *_: calls.append("previous"))
    previous = signal.getsignal(signal.SIGUSR1)
    out = sys.argv[1]
    with recfn.profile(flight_recorder=3, output=out) as prof:
        with recfn.record_function("hung"):
            for i in range(6):
                recfn.mark(f"m{i}")
            os.kill(os.getpid(), signal.SIGUSR1)
            dumped = recfn.load(out)
    print(json.dumps({
        "names": [str(n) for n in dumped.table.column("name").to_pylist()],
        "facts": json.loads(dumped.metadata["recfn.flight_recorder"]),
        "calls": calls,
        "restored": signal.getsignal(signal.SIGUSR1) is previous,
    }))
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals")
def test_sigusr1_dumps_chains_the_previous_handler_and_stop_restores_it(tmp_path: Path) -> None:
    out = tmp_path / "signal.parquet"
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    done = subprocess.run(
        [sys.executable, "-c", SIGNAL_CHILD, str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["names"] == ["hung", "m3", "m4", "m5"]
    assert result["facts"]["reason"] == "signal" and result["facts"]["open_ranges"] == 1
    assert result["calls"] == ["previous"]
    assert result["restored"] is True


def test_recfn_run_flight_recorder_dumps_a_crashing_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "crash.py"
    script.write_text(
        "import recfn\n"
        "for i in range(100):\n"
        "    with recfn.record_function(f's{i}'):\n"
        "        pass\n"
        "raise RuntimeError('crash')\n"
    )
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out.parquet"
    argv = ["run", "--flight-recorder", "5", "--no-trace-calls", "-q"]
    assert main([*argv, str(script), "-o", str(out)]) == 1
    trace = recfn.load(out)
    assert names(trace) == ["s96", "s97", "s98", "s99", "__stop_profile"]
    assert facts(trace)["reason"] == "exception: RuntimeError: crash"
    assert f"flight recorder wrote its last 5 events to {out}" in capsys.readouterr().err
    assert main([*argv, str(script)]) == 1
    assert (tmp_path / f"recfn-flight-{os.getpid()}.parquet").exists()


def test_a_signal_during_a_spill_dumps_from_a_helper_thread_once_it_is_done() -> None:
    written: list[Any] = []
    with recfn.profile(flight_recorder=2) as prof:
        recfn.mark("a")
        ring = prof._ring
        ring._lock.acquire()  # as a spill under way holds it
        try:
            dump_in_background(ring, written.append)
            assert written == []  # the handler did not wait for the lock
            (helper,) = [t for t in threading.enumerate() if t.name == "recfn-flight-dump"]
        finally:
            ring._lock.release()
        helper.join()
    (table,) = written
    dumped = recfn.Trace(table)
    assert names(dumped) == ["__start_profile", "a"]
    assert facts(dumped)["reason"] == "signal"


CHILDREN = """\
import multiprocessing
import recfn


def work(k):
    for i in range(20):
        recfn.mark(f"w{k}.{i}")


if __name__ == "__main__":
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=work, args=(k,)) for k in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join()
"""


def test_recfn_run_flight_recorder_into_a_folder_follows_children(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(CHILDREN)
    folder = tmp_path / "crash"
    argv = ["run", "--flight-recorder", "5", "--no-trace-calls", "-q", str(script)]
    assert main([*argv, "-o", f"{folder}/"]) == 0
    dumps = sorted(folder.glob("hostname=*/process=*/flight.parquet"))
    assert len(dumps) == 3  # the script's process and its two children
    df = recfn.load(folder).to_pandas()
    per_child = df[df["name"].astype(str).str.startswith("w")].groupby("pid")["name"]
    assert sorted(len(names) for _, names in per_child) == [4, 4]  # the last 5: 4 marks + stop
    assert {str(n)[3:] for _, names in per_child for n in names} == {"16", "17", "18", "19"}


def test_a_dump_that_fails_in_a_signal_handler_warns_and_the_program_goes_on() -> None:
    def refuse(table: Any) -> None:
        raise OSError("disk full")

    with recfn.profile(flight_recorder=2) as prof:
        with pytest.warns(RuntimeWarning, match="could not dump: OSError"):
            dump_in_background(prof._ring, refuse)
        recfn.mark("after")
    assert names(prof.trace)[-2:] == ["after", "__stop_profile"]


@pytest.mark.parametrize("when", ["before the ring", "after the ring"])
def test_a_ctrl_c_during_a_spill_keeps_its_rows(monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """A Ctrl-C while a spilled table goes into the ring, before it got there or just after:
    a dump meanwhile has its rows, the next spill adds them once, and nothing is dropped."""
    from recfn.capture._stream import _this_thread_id

    raised: list[str] = []
    with recfn.profile(flight_recorder=100_000) as prof:
        ring = prof._ring
        assert ring is not None
        for _ in range(5_000):
            with recfn.record_function("step"):
                pass
        keep = ring._keep

        def interrupted(table: Any, wall_ns: Any) -> None:
            if not raised:
                raised.append(when)
                if when == "after the ring":
                    keep(table, wall_ns)
                raise KeyboardInterrupt
            keep(table, wall_ns)

        monkeypatch.setattr(ring, "_keep", interrupted)
        with pytest.raises(KeyboardInterrupt):
            ring.spill(prof._recorder.thread_buffers[_this_thread_id()])
        assert names(prof.dump()).count("step") == 5_000
        for _ in range(100):
            with recfn.record_function("step"):
                pass
        ring.spill(prof._recorder.thread_buffers[_this_thread_id()])
        assert not ring._unsaved
    assert raised == [when]
    assert names(prof.trace).count("step") == 5_100
    assert prof.trace.dropped_events == 0 and facts(prof.trace)["discarded"] == 0
