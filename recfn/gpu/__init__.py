"""GPUs: NVTX forwarding (``profile(nvtx=True)``, ``emit_nvtx()``) and CUDA event timing per
range (``profile(cuda=True)``). Neither imports nvtx or torch until it is used."""

from __future__ import annotations

from recfn.gpu._cuda import CudaTimer, DeviceTimes
from recfn.gpu._nvtx import NvtxForwarder, emit_nvtx, forward_mark

__all__ = ["CudaTimer", "DeviceTimes", "NvtxForwarder", "emit_nvtx", "forward_mark"]
