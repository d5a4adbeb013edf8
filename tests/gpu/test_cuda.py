"""profile(cuda=True): GPU time per range from CUDA events (GPU tests skip without a CUDA device)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import recfn


def cuda_missing() -> str | None:
    """Why the GPU tests cannot run here, or None when they can."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return None if torch.cuda.is_available() else "no CUDA device"


def has_cuda() -> bool:
    return cuda_missing() is None


needs_cuda = pytest.mark.skipif(not has_cuda(), reason=cuda_missing() or "")


def timed_by_hand(torch: Any, x: Any, ranges: dict[str, int]) -> tuple[Any, dict[str, float]]:
    """A ``profile(cuda=True)`` of `ranges` (name: products of `x` in it), each range's work
    also bracketed by CUDA events taken by hand on the current stream; the profile and each
    range's hand-taken ns."""
    by_hand: dict[str, tuple[Any, Any]] = {}
    with recfn.profile(cuda=True) as prof:
        for name, reps in ranges.items():
            with recfn.record_function(name):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(reps):
                    x @ x
                end.record()
            by_hand[name] = (start, end)
    torch.cuda.synchronize()
    return prof, {name: start.elapsed_time(end) * 1e6 for name, (start, end) in by_hand.items()}


def gpu_durations(prof: Any) -> dict[str, Any]:
    table = prof.table
    return dict(
        zip(table.column("name").to_pylist(), table.column("device_duration_ns").to_pylist())
    )


def test_without_torch_the_error_names_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(ImportError, match="cuda=True needs PyTorch.*torch is not installed"):
        recfn.profile(cuda=True).start()
    assert not recfn.has_callbacks()


@pytest.mark.skipif(has_cuda(), reason="a CUDA device is present")
def test_without_a_device_the_error_says_so() -> None:
    pytest.importorskip("torch")
    prof = recfn.profile(cuda=True)
    with pytest.raises(RuntimeError, match="cuda=True needs a CUDA device, but"):
        prof.start()
    assert not prof.running
    assert not recfn.has_callbacks()
    with recfn.profile() as again:  # nothing was left enabled
        pass
    assert "device_start_ns" not in again.table.column_names


@needs_cuda
def test_gpu_time_per_range_matches_cuda_events_taken_by_hand() -> None:
    import torch

    x = torch.randn(2048, 2048, device="cuda")
    x @ x  # warm up the kernels
    torch.cuda.synchronize()
    prof, by_hand = timed_by_hand(torch, x, {"mm0": 2, "mm1": 4, "mm2": 8})
    table = prof.table
    rows = {
        name: (cpu_start, gpu_start, gpu_duration, device)
        for name, cpu_start, gpu_start, gpu_duration, device in zip(
            table.column("name").to_pylist(),
            table.column("start_ns").to_pylist(),
            table.column("device_start_ns").to_pylist(),
            table.column("device_duration_ns").to_pylist(),
            table.column("device").to_pylist(),
        )
    }
    device = f"cuda:{torch.cuda.current_device()}"
    for name, expected_ns in by_hand.items():
        cpu_start, gpu_start, gpu_duration, row_device = rows[name]
        assert gpu_duration == pytest.approx(expected_ns, rel=0.10), name
        assert row_device == device
        assert gpu_start >= cpu_start - 1_000_000  # GPU work starts after it is queued (1 ms slack)
    assert rows["__start_profile"][2] is None  # marks have no GPU time
    summary = prof.to_pandas().recfn.summary()  # the GPU time beside the CPU time
    assert summary.loc["mm2", "device_total_ns"] == rows["mm2"][2]
    assert summary.loc["mm2", "device"] == device


@needs_cuda
def test_ranges_in_the_no_cuda_list_get_no_events() -> None:
    with recfn.profile(cuda=True) as prof:
        with recfn.record_function("aten::view"):
            pass
        with recfn.record_function("work"):
            pass
    gpu = gpu_durations(prof)
    assert gpu["aten::view"] is None
    assert gpu["work"] is not None


@needs_cuda
def test_a_second_profile_records_the_events_the_first_one_read() -> None:
    import torch

    from recfn.gpu import _cuda

    x = torch.randn(2048, 2048, device="cuda")  # GPU work of a millisecond, not launch gaps
    x @ x
    ranges = {f"mm{i}": 2 + i for i in range(4)}
    device = torch.cuda.current_device()
    _cuda._POOLS.pop(device, None)  # whatever earlier profiles left
    timed_by_hand(torch, x, ranges)
    assert len(_cuda._POOLS[device]) == 2 * len(ranges)  # read at stop: free to record again
    second, by_hand = timed_by_hand(torch, x, ranges)
    gpu = gpu_durations(second)
    for name in ranges:
        assert gpu[name] == pytest.approx(by_hand[name], rel=0.10), name


@needs_cuda
def test_ranges_on_a_side_stream_are_timed_on_that_stream() -> None:
    import torch

    x = torch.randn(2048, 2048, device="cuda")
    x @ x
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        prof, by_hand = timed_by_hand(torch, x, {"side0": 2, "side1": 3})
    gpu = gpu_durations(prof)
    for name, ns in by_hand.items():
        assert ns > 100_000  # the work ran on the side stream, not the idle default one
        assert gpu[name] == pytest.approx(ns, rel=0.10), name
