"""Who recorded an event in a fleet: host, process and the rank a launcher gave it.

Every event is identified across a fleet by ``(host, pid, thread_id)``; ``rank`` is the
process's place in a ``torch.distributed`` job (or an MPI/Slurm one), ``-1`` when it has none.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Optional

RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
"""Environment variables that launchers set to the global rank, in the order they are read."""
LOCAL_RANK_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")
WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")


def host() -> str:
    """This machine's host name."""
    return socket.gethostname()


def _first_int(names: tuple[str, ...]) -> Optional[int]:
    for name in names:
        raw = os.environ.get(name, "").strip()
        if raw:
            try:
                return int(raw)
            except ValueError:
                continue
    return None


def _torch_distributed() -> Optional[tuple[int, int]]:
    """Rank and world size of an initialised ``torch.distributed`` group (torch already loaded)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), int(dist.get_world_size())
    except Exception:  # a half-initialised group must not break profiling
        return None
    return None


def rank() -> int:
    """The global rank: ``torch.distributed`` when initialised, else the launcher's environment
    (``RANK``, MPI, Slurm); -1 when the process is not part of a distributed job."""
    group = _torch_distributed()
    if group is not None:
        return group[0]
    found = _first_int(RANK_VARIABLES)
    return -1 if found is None else found


def local_rank() -> int:
    """The rank within this host (``LOCAL_RANK``...), -1 when unknown."""
    found = _first_int(LOCAL_RANK_VARIABLES)
    return -1 if found is None else found


def world_size() -> int:
    """The number of ranks of the job, -1 when unknown."""
    group = _torch_distributed()
    if group is not None:
        return group[1]
    found = _first_int(WORLD_SIZE_VARIABLES)
    return -1 if found is None else found
