"""GPU time per range for ``recfn.profile(cuda=True)``: CUDA events around every range.

A ``CudaTimer`` is an engine callback: at a range's start and end it records a timing
``torch.cuda.Event`` on the calling thread's current stream (recording is asynchronous: nothing
waits for the GPU while the program runs). At stop it synchronises once and turns each pair into
the range's GPU start (on the table's clock, through one event per device recorded at an idle
moment when profiling started) and GPU duration. Names in ``NO_CUDA_EVENTS`` (the legacy
profiler's list of metadata-only operators that launch no kernel) get no events.
torch is imported only when a timer is made.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from recfn.engine import registry as _registry
from recfn.engine.ranges import RecordFunction, RecordFunctionCallback
from recfn.errors import RecfnStateError

if TYPE_CHECKING:
    import numpy as np

NO_CUDA_EVENTS = frozenset(
    {
        "aten::view",
        "aten::t",
        "aten::transpose",
        "aten::stride",
        "aten::empty",
        "aten::empty_like",
        "aten::empty_strided",
        "aten::as_strided",
        "aten::expand",
        "aten::resize_",
        "aten::squeeze",
        "aten::unsqueeze",
        "aten::slice",
        "aten::_unsafe_view",
        "aten::size",
    }
)


class DeviceTimes(NamedTuple):
    """GPU times of the ranges a timer saw: range ids, start and duration (ns), device labels."""

    ids: np.ndarray
    start_ns: np.ndarray
    duration_ns: np.ndarray
    devices: list[str]


def require_cuda() -> Any:
    """The ``torch`` module when a CUDA device can be used; else an error naming what is missing."""
    try:
        import torch
    except ImportError as exc:
        raise ImportError(
            "recfn: cuda=True needs PyTorch with a CUDA device, and torch is not installed",
            name="torch",
        ) from exc
    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            reason = f"this torch build ({torch.__version__}) has no CUDA support"
        else:
            reason = "torch.cuda.is_available() is False: no CUDA device is visible"
        raise RecfnStateError(f"recfn: cuda=True needs a CUDA device, but {reason}")
    return torch


class CudaTimer:
    """Records CUDA events around each range (of ``scopes``; None: all) between start and stop."""

    def __init__(self, scopes: Optional[Iterable[Any]]) -> None:
        torch = require_cuda()
        self._torch = torch
        self._event = torch.cuda.Event
        self._current_device = torch.cuda.current_device
        self._pairs: list[tuple[int, Any, Any, int]] = []  # (range id, start, end, device)
        self._bases: list[tuple[Any, int]] = []  # per device: (event, its time on the table clock)
        self._stopped = False
        self._handle = 0
        self._callback = RecordFunctionCallback(
            self._on_start, self._on_end, needs_ids=True, scopes=scopes
        )

    def start(self, clock_offset: int) -> None:
        """Anchor each device's GPU clock to the table's clock (perf_counter + ``clock_offset``)."""
        cuda = self._torch.cuda
        for device in range(cuda.device_count()):
            with cuda.device(device):
                cuda.synchronize()  # an idle stream: the event runs as soon as it is recorded
                base = self._event(enable_timing=True)
                base.record()
                now = time.perf_counter_ns() + clock_offset
                base.synchronize()
            self._bases.append((base, now))
        self._handle = _registry.add_global_callback(self._callback)

    def _on_start(self, rf: RecordFunction) -> object:
        if rf.name in NO_CUDA_EVENTS:
            return None
        event = self._event(enable_timing=True)
        event.record()
        return (event, self._current_device())

    def _on_end(self, rf: RecordFunction, ctx: object) -> None:
        if self._stopped or not isinstance(ctx, tuple) or self._current_device() != ctx[1]:
            return  # a pair of events on two devices has no elapsed time
        end = self._event(enable_timing=True)
        end.record()
        self._pairs.append((rf.handle, ctx[0], end, ctx[1]))

    def stop(self) -> DeviceTimes:
        """Stop recording, wait for the GPU once and return the ranges' GPU times."""
        import numpy as np

        _registry.remove_callback(self._handle)
        self._stopped = True
        cuda = self._torch.cuda
        for device in range(len(self._bases)):
            cuda.synchronize(device)
        n = len(self._pairs)
        ids = np.empty(n, dtype=np.int64)
        starts = np.empty(n, dtype=np.int64)
        durations = np.empty(n, dtype=np.int64)
        devices: list[str] = []
        for i, (rid, start, end, device) in enumerate(self._pairs):
            base, base_ns = self._bases[device]
            ids[i] = rid
            starts[i] = base_ns + round(base.elapsed_time(start) * 1e6)  # elapsed_time is in ms
            durations[i] = round(start.elapsed_time(end) * 1e6)
            devices.append(f"cuda:{device}")
        self._pairs = []
        return DeviceTimes(ids, starts, durations, devices)
