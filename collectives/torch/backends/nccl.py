"""``nccl`` backend: CUDA tensors through torch.distributed's NCCL process groups.

The torch adapter keeps fusion buffers on the tensor's device, so a fused allreduce is one NCCL call on
device memory. Each op's span covers the GPU work: after ``work.wait()`` (which only orders the
streams) a CUDA event is recorded and polled with a backoff until the GPU is done, so the backend
thread neither returns early nor busy-spins.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from collectives import mpi_wait, runtime
from collectives.torch import rendezvous
from collectives.torch.backends.dist import GroupSpec, TorchDistBackend
from tracer import vocab as V

# dtypes NCCL reduces natively (ncclDataType_t); others are refused with a clear error
NCCL_DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64")


def nccl_device(local_rank: int, device_count: int) -> str:
    """The GPU a rank drives: ``cuda:<local_rank mod device count>`` (Horovod's pinning rule)."""
    if device_count < 1:
        raise RuntimeError("the nccl backend needs a CUDA device, and torch sees none")
    return f"cuda:{local_rank % device_count}"


def nccl_options():
    """ProcessGroupNCCL options: ordinary-priority streams, the rendezvous timeout."""
    opts = dist.ProcessGroupNCCL.Options()
    opts.is_high_priority_stream = False
    opts._timeout = rendezvous.timeout()
    return opts


def check_dtype(buf) -> None:
    name = str(buf.dtype).replace("torch.", "")
    if name not in NCCL_DTYPES:
        raise TypeError(f"NCCL cannot reduce dtype {name}; use one of {', '.join(NCCL_DTYPES)}")


class NcclBackend(TorchDistBackend):
    name = "nccl"
    names = {"allreduce": V.NCCL_ALLREDUCE, "allgather": V.NCCL_ALLGATHER,
             "broadcast": V.NCCL_BCAST, "alltoall": V.NCCL_ALLTOALL,
             "reducescatter": V.NCCL_REDUCESCATTER, "barrier": V.NCCL_BARRIER}

    def __init__(self, config=None):
        super().__init__(config)
        if not (dist.is_available() and dist.is_nccl_available()):
            raise RuntimeError("this torch build has no NCCL; CUDA tensors cannot be reduced "
                               "(install a CUDA build of torch)")
        self.device = torch.device(nccl_device(runtime.local_rank(), torch.cuda.device_count()))

    def make_group(self, spec: GroupSpec):
        store = dist.PrefixStore(spec.prefix, rendezvous.store())
        return dist.ProcessGroupNCCL(store, spec.rank, spec.size, nccl_options())

    def allreduce(self, buf, op, comm) -> None:
        check_dtype(buf)
        super().allreduce(buf, op, comm)

    def finish(self, work, buf) -> None:
        work.wait()                      # orders the current stream after NCCL's
        done = torch.cuda.Event()
        done.record(torch.cuda.current_stream(buf.device))
        backoff = mpi_wait.Backoff()
        while not done.query():
            backoff.pause()

    def barrier_device(self) -> str:
        return str(self.device)
