"""Ranges and marks forwarded to NVTX, seen by a real NVTX tool.

A small C injection library (nvtx_injection.c, built here with gcc against the headers of the
nvidia-nvtx-cu12 wheel) is loaded by NVTX from ``NVTX_INJECTION64_PATH`` in a subprocess; it logs
every push/pop, start/end, mark and registered string with the OS thread that made the call.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Optional

import pytest

import recfn
from recfn.gpu._nvtx import nvtx_name

HERE = Path(__file__).parent


def nvtx_include_dir() -> Optional[Path]:
    """The include folder of the nvidia-nvtx-cu12 wheel, if installed."""
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        include = Path(base) / "nvtx" / "include"
        if (include / "nvtx3" / "nvToolsExt.h").is_file():
            return include
    return None


@pytest.fixture(scope="module")
def injection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("nvtx", reason="the nvtx package (recfn[gpu]) is not installed")
    gcc = shutil.which("gcc")
    include = nvtx_include_dir()
    if gcc is None or include is None:
        pytest.skip("needs gcc and the NVTX headers (pip install nvidia-nvtx-cu12)")
    lib = tmp_path_factory.mktemp("nvtx") / "libinjection.so"
    subprocess.run(
        [gcc, "-shared", "-fPIC", f"-I{include}", str(HERE / "nvtx_injection.c"), "-o", str(lib)]
        + ["-lpthread"],
        check=True,
    )
    return lib


def run_with_tool(lib: Path, tmp_path: Path, program: str) -> tuple[dict[str, int], list[tuple]]:
    """Run ``program`` under the NVTX tool; returns what it printed (JSON) and the NVTX calls."""
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(program))
    log = tmp_path / "nvtx.log"
    env = dict(os.environ, NVTX_INJECTION64_PATH=str(lib), RECFN_NVTX_LOG=str(log))
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    calls = []
    for line in log.read_text().splitlines():
        tid, call, range_id, message = line.split("\t", 3)
        calls.append((int(tid), call, int(range_id), message))
    return json.loads(done.stdout.strip().splitlines()[-1]), calls


def on_thread(calls: list[tuple], tid: int) -> list[tuple[str, int, str]]:
    """That thread's range and mark calls, in order (domain creation and strings left out)."""
    return [
        (call, rid, msg)
        for t, call, rid, msg in calls
        if t == tid and call not in ("domain", "string")
    ]


PROGRAM = """
import asyncio, concurrent.futures, json, threading
import numpy as np
import recfn

ids = {"main": threading.get_native_id()}

@recfn.record_function("deco")
def decorated(x):
    return x

class Model:
    def forward(self, x):
        return x

recfn.instrument(Model, include=["forward"], prefix="app")

def traced():
    with recfn.record_function("in_traced"):
        pass

def work():
    ids["worker"] = threading.get_native_id()
    with recfn.record_function("in_thread"):
        with recfn.record_function("inner"):
            pass

def pool_id():
    ids["pool"] = threading.get_native_id()

async def tasks():
    a_entered, b_done = asyncio.Event(), asyncio.Event()
    async def a():
        with recfn.record_function("task_a"):
            a_entered.set()
            await b_done.wait()
    async def b():
        await a_entered.wait()
        with recfn.record_function("task_b"):
            await asyncio.sleep(0)
        b_done.set()
    await asyncio.gather(a(), b())

with recfn.emit_nvtx():
    with recfn.record_function("forwarded_only"):
        recfn.mark("m0")
with recfn.record_function("not_forwarded"):
    recfn.mark("not_forwarded_mark")

pool = concurrent.futures.ThreadPoolExecutor(1)
pool.submit(pool_id).result()
with recfn.profile(
    nvtx=True, report_input_shapes=True, trace_calls=True, trace_include=["__main__.traced"]
) as prof:
    with recfn.record_function("outer"):
        recfn.mark("m1")
        with recfn.record_function_fast("fast", input_values=[np.zeros((2, 3)), 1]):
            pass
        decorated(1)
        Model().forward(2)
        traced()
        rf = recfn.RecordFunction(recfn.RecordScope.USER_SCOPE)
        rf.before("seq_op", (np.zeros(4),), sequence_nr=7)
        rf.end()
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    gate = threading.Event()
    with recfn.record_function("rpc") as rpc:
        future = rpc.end_on_future(pool.submit(gate.wait))
    gate.set()
    future.result()
    with recfn.record_function("parent"):
        handoff = recfn.RecordFunction(recfn.RecordScope.USER_SCOPE)
        handoff.before("handoff")
        ender = threading.Thread(target=handoff.end)
        ender.start()
        ender.join()
    asyncio.run(tasks())
names = set(prof.table.column("name").to_pylist())
assert {"outer", "fast", "deco", "__main__::traced", "task_a", "rpc"} <= names, names
print(json.dumps(ids))
"""


def test_ranges_and_marks_reach_an_nvtx_tool(injection: Path, tmp_path: Path) -> None:
    ids, calls = run_with_tool(injection, tmp_path, PROGRAM)
    main = on_thread(calls, ids["main"])
    starts = {msg: rid for call, rid, msg in main if call == "start"}
    assert main == [
        # emit_nvtx(): forwards only; nothing outside it reaches NVTX
        ("mark", 0, "__start_profile"),
        ("push", 0, "forwarded_only"),
        ("mark", 0, "m0"),
        ("pop", 0, ""),
        ("mark", 0, "__stop_profile"),
        # profile(nvtx=True, report_input_shapes=True, trace_calls=True)
        ("mark", 0, "__start_profile"),
        ("push", 0, "outer"),
        ("mark", 0, "m1"),
        ("push", 0, "fast, sizes = [[2, 3], []]"),
        ("pop", 0, ""),
        ("push", 0, "deco"),
        ("pop", 0, ""),
        ("push", 0, "app::Model.forward, sizes = [[], []]"),
        ("pop", 0, ""),
        ("push", 0, "__main__::traced"),
        ("push", 0, "in_traced"),
        ("pop", 0, ""),
        ("pop", 0, ""),
        ("push", 0, "seq_op, seq = 7, sizes = [[4]]"),
        ("pop", 0, ""),
        ("pop", 0, ""),
        # end_on_future: pushed while on this thread, then a start/end range until it ends
        ("push", 0, "rpc"),
        ("pop", 0, ""),
        ("start", starts["rpc"], "rpc"),
        # ended from another thread: popped here when the enclosing range ends
        ("push", 0, "parent"),
        ("push", 0, "handoff"),
        ("pop", 0, ""),
        ("pop", 0, ""),
        # asyncio tasks interleave on one thread: start/end ranges
        ("start", starts["task_a"], "task_a"),
        ("start", starts["task_b"], "task_b"),
        ("end", starts["task_b"], ""),
        ("end", starts["task_a"], ""),
        ("mark", 0, "__stop_profile"),
    ]
    assert len({starts["rpc"], starts["task_a"], starts["task_b"]}) == 3
    assert on_thread(calls, ids["worker"]) == [
        ("push", 0, "in_thread"),
        ("push", 0, "inner"),
        ("pop", 0, ""),
        ("pop", 0, ""),
    ]
    assert on_thread(calls, ids["pool"]) == [("end", starts["rpc"], "")]
    assert {tid for tid, *_ in calls} == {ids["main"], ids["worker"], ids["pool"]}
    # messages go through registered strings, each registered once before its first use
    registered = [msg for _, call, _, msg in calls if call == "string"]
    assert len(registered) == len(set(registered))
    for i, (_, call, _, msg) in enumerate(calls):
        if call in ("push", "start", "mark"):
            assert any(c[1] == "string" and c[3] == msg for c in calls[:i]), msg


def test_no_tool_attached_forwards_nothing_and_records_as_usual() -> None:
    pytest.importorskip("nvtx")
    if os.environ.get("NVTX_INJECTION64_PATH"):
        pytest.skip("an NVTX tool is attached to the test process")
    with recfn.profile(nvtx=True) as prof:
        with recfn.record_function("step"):
            recfn.mark("m")
    assert prof.table.column("name").to_pylist() == [
        "__start_profile",
        "step",
        "m",
        "__stop_profile",
    ]
    assert not recfn.has_callbacks()
    with recfn.emit_nvtx():
        assert not recfn.has_callbacks()  # nothing to forward to: nothing registered


def test_one_forwarder_at_a_time() -> None:
    pytest.importorskip("nvtx")
    with recfn.emit_nvtx():
        with pytest.raises(RuntimeError, match="already on"):
            recfn.profile(nvtx=True).start()
        with pytest.raises(RuntimeError, match="already on"):
            recfn.emit_nvtx().__enter__()
    with recfn.profile(nvtx=True):  # free again
        pass


def test_missing_nvtx_package_names_package_and_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nvtx", None)  # `import nvtx` raises ImportError
    with pytest.raises(ImportError, match=r"'nvtx' package.*recfn\[gpu\]"):
        recfn.profile(nvtx=True).start()
    with pytest.raises(ImportError, match=r"recfn\[gpu\]"):
        with recfn.emit_nvtx():
            pass
    assert not recfn.has_callbacks()
    with recfn.emit_nvtx(enabled=False):  # disabled: never needs the package
        pass


def test_options_are_checked() -> None:
    with pytest.raises(TypeError, match="ProfilerConfig.nvtx must be a bool"):
        recfn.ProfilerConfig(nvtx="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ProfilerConfig.cuda must be a bool"):
        recfn.profile(cuda=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="record_shapes must be a bool"):
        recfn.emit_nvtx(record_shapes=None)  # type: ignore[arg-type]
    assert recfn.ProfilerConfig(nvtx=True).to_dict()["nvtx"] is True


@pytest.mark.parametrize(
    ("name", "seq", "shapes", "expected"),
    [
        ("mm", -1, None, "mm"),
        ("mm", 0, None, "mm, seq = 0"),
        ("mm", 12, [[2, 3], [3]], "mm, seq = 12, sizes = [[2, 3], [3]]"),
        ("mm", -1, [[], [5]], "mm, sizes = [[], [5]]"),
        ("mm", -1, [], "mm"),
    ],
)
def test_nvtx_names_follow_the_legacy_profiler(
    name: str, seq: int, shapes: Optional[list[list[int]]], expected: str
) -> None:
    assert nvtx_name(name, seq, shapes) == expected
