"""This rank's clock offset against rank 0 over a torch.distributed process group: the runtime's
ping-pong (:func:`collectives.clock_sync.ping_pong`) with gloo's blocking send and recv, so a DDP
job's traces line up when merged without MPI."""
from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from collectives import clock_sync


def measure(group: dist.ProcessGroup) -> tuple[int, int]:
    """(offset_ns, uncertainty_ns) of this rank in ``group`` (a gloo group); collective over it."""
    dist.barrier(group=group)

    def send(buf: np.ndarray, peer: int) -> None:
        dist.send(torch.from_numpy(buf), group=group, group_dst=peer)

    def recv(buf: np.ndarray, peer: int) -> None:
        dist.recv(torch.from_numpy(buf), group=group, group_src=peer)

    return clock_sync.ping_pong(dist.get_rank(group), dist.get_world_size(group), send, recv)
