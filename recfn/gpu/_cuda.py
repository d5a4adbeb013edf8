"""GPU time per range for ``recfn.profile(cuda=True)``: CUDA events around every range.

A ``CudaTimer`` is an engine callback: at a range's start and end it records a timing
``torch.cuda.Event`` on the calling thread's current stream (recording is asynchronous: nothing
waits for the GPU while the program runs). At stop it synchronises once and turns each pair into
the range's GPU start (on the table's clock, through one event per device recorded at an idle
moment when profiling started) and GPU duration. Names in ``NO_CUDA_EVENTS`` (the legacy
profiler's list of metadata-only operators that launch no kernel) get no events.

The hot path asks torch's C layer for the device and the current stream (the public
``torch.cuda.current_stream()`` builds a Python ``Stream`` each call: 4 us of the 8 a recorded
event took on an H200) and keeps one ``Stream`` object per stream it met; events read at stop
go back to a pool per device for the next profile (an event's first record creates its CUDA
event).
torch is imported only when a timer is made.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Optional

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


POOL_LIMIT: Final = 1 << 16
"""Events kept per device between profiles, their times read (two per range)."""

_POOLS: dict[int, list[Any]] = {}  # device index -> events free to record again


class CudaTimer:
    """Records CUDA events around each range (of ``scopes``; None: all) between start and stop."""

    def __init__(self, scopes: Optional[Iterable[Any]]) -> None:
        torch = require_cuda()
        self._torch = torch
        self._event = torch.cuda.Event
        native = torch._C
        self._device = getattr(native, "_cuda_getDevice", torch.cuda.current_device)
        self._stream_key = getattr(native, "_cuda_getCurrentStream", None)
        base = getattr(native, "_CudaEventBase", torch.cuda.Event)
        self._record = getattr(base, "record", torch.cuda.Event.record)
        self._streams: dict[Any, Any] = {}  # (stream id, device, type) -> its Stream
        # one entry per timed range, in flat lists: no tuple per range for the collector to walk
        self._ids: list[int] = []
        self._starts: list[Any] = []
        self._ends: list[Any] = []
        self._devices: list[int] = []
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

    def _stream(self, device: int) -> Any:
        """The calling thread's current stream on ``device``, one ``Stream`` object per stream."""
        if self._stream_key is None:  # a torch without the C function: its public one
            return self._torch.cuda.current_stream(device)
        key = self._stream_key(device)
        stream = self._streams.get(key)
        if stream is None:
            stream = self._torch.cuda.Stream(
                stream_id=key[0], device_index=key[1], device_type=key[2]
            )
            self._streams[key] = stream
        return stream

    def _recorded(self, device: int) -> Any:
        """An event (from the device's pool when it has one) recorded on the current stream."""
        try:
            event = _POOLS[device].pop()
        except (KeyError, IndexError):
            event = self._event(enable_timing=True)
        self._record(event, self._stream(device))
        return event

    def _on_start(self, rf: RecordFunction) -> object:
        if rf.name in NO_CUDA_EVENTS:
            return None
        device = self._device()
        return (self._recorded(device), device)

    def _on_end(self, rf: RecordFunction, ctx: object) -> None:
        if self._stopped or not isinstance(ctx, tuple):
            return
        device = self._device()
        if device != ctx[1]:
            return  # a pair of events on two devices has no elapsed time
        self._ids.append(rf.handle)
        self._starts.append(ctx[0])
        self._ends.append(self._recorded(device))
        self._devices.append(device)

    def stop(self) -> DeviceTimes:
        """Stop recording, wait for the GPU once and return the ranges' GPU times."""
        import numpy as np

        _registry.remove_callback(self._handle)
        self._stopped = True
        cuda = self._torch.cuda
        for device in range(len(self._bases)):
            cuda.synchronize(device)
        starts: list[int] = []
        durations: list[int] = []
        for start, end, device in zip(self._starts, self._ends, self._devices):
            base, base_ns = self._bases[device]
            starts.append(base_ns + round(base.elapsed_time(start) * 1e6))  # elapsed_time: ms
            durations.append(round(start.elapsed_time(end) * 1e6))
        labels = {device: f"cuda:{device}" for device in set(self._devices)}
        for device in labels:  # the events read go back to their device's pool
            pool = _POOLS.setdefault(device, [])
            room = POOL_LIMIT - len(pool)
            if room > 0:
                pairs = zip(self._starts, self._ends, self._devices)
                pool += [event for s, e, d in pairs if d == device for event in (s, e)][:room]
        times = DeviceTimes(
            np.array(self._ids, dtype=np.int64),
            np.array(starts, dtype=np.int64),
            np.array(durations, dtype=np.int64),
            [labels[device] for device in self._devices],
        )
        self._ids, self._starts, self._ends, self._devices = [], [], [], []
        return times
