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
    by_hand: dict[str, tuple[Any, Any]] = {}
    with recfn.profile(cuda=True) as prof:
        for i, reps in enumerate((2, 4, 8)):
            with recfn.record_function(f"mm{i}"):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(reps):
                    x @ x
                end.record()
            by_hand[f"mm{i}"] = (start, end)
    torch.cuda.synchronize()
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
    for name, (start, end) in by_hand.items():
        cpu_start, gpu_start, gpu_duration, row_device = rows[name]
        expected_ns = start.elapsed_time(end) * 1e6
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
    table = prof.table
    gpu = dict(
        zip(table.column("name").to_pylist(), table.column("device_duration_ns").to_pylist())
    )
    assert gpu["aten::view"] is None
    assert gpu["work"] is not None
