"""Horovod's ``horovod.torch`` API on ringscope's engine: ``import collectives.torch as hvd``.

Everything a Horovod training script calls is here under the same name and with the same meaning:
init/rank/size, the collectives (sync, async, in-place, grouped, autograd-aware), the
DistributedOptimizer, broadcasting of parameters, optimizer state and objects, process sets, and
start_timeline/stop_timeline.

mpi4py.MPI is imported where it is used: importing it starts MPI, which ``init`` does first.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import torch
import torch.distributed as dist

import collectives as _core
from collectives import process_sets as _ps
from collectives.engine import get_engine
from collectives.handles import CollectiveError as HorovodInternalError  # noqa: F401
from collectives.ops import Average, Max, Min, Product, Sum  # noqa: F401
from collectives.torch import (
    elastic,  # noqa: F401  (hvd.elastic.run / TorchState / ElasticSampler)
    timeline,  # noqa: F401  (hvd.timeline.region / wrap_loader / watch / profile)
)
from collectives.torch.autograd import (  # noqa: F401
    allgather,
    allreduce,
    alltoall,
    broadcast,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    reducescatter,
)
from collectives.torch.compression import Compression  # noqa: F401
from collectives.torch.functions import (  # noqa: F401
    allgather_object,
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from collectives.torch.mpi_ops import (  # noqa: F401
    Adasum,
    Handle,
    allgather_async,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    alltoall_async,
    barrier,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    grouped_allgather_async,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    grouped_reducescatter_async,
    join,
    poll,
    reducescatter_async,
    sparse_allreduce_async,
    synchronize,
)
from collectives.torch.optimizer import DistributedOptimizer  # noqa: F401
from collectives.torch.setup import init, shutdown  # noqa: F401
from collectives.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401

ProcessSet = _ps.ProcessSet
global_process_set = _ps.global_process_set


def is_initialized() -> bool:
    """True between :func:`init` and :func:`shutdown`."""
    return _core.is_initialized()


def rank() -> int:
    return _core.rank()


def size() -> int:
    return _core.size()


def local_rank() -> int:
    return _core.local_rank()


def local_size() -> int:
    return _core.local_size()


def cross_rank() -> int:
    return _core.cross_rank()


def cross_size() -> int:
    return _core.cross_size()


def add_process_set(process_set_or_ranks: ProcessSet | Sequence[int]) -> ProcessSet:
    """Register a process set on every rank (collective: all ranks call it in the same order)."""
    return _core.add_process_set(process_set_or_ranks)


def remove_process_set(process_set: ProcessSet) -> bool:
    """Unregister a process set on every rank (collective); True when it was removed."""
    _core.remove_process_set(process_set)
    return True


def start_timeline(file_path: str | os.PathLike[str], mark_cycles: bool = False) -> None:
    """Start writing this rank's timeline to ``file_path`` at run time."""
    _core.start_timeline(file_path, mark_cycles=mark_cycles)


def stop_timeline() -> None:
    """Stop writing the timeline and finish the file."""
    _core.stop_timeline()


def mpi_built() -> bool:
    return True


def mpi_enabled() -> bool:
    return True


def mpi_threads_supported() -> bool:
    """Whether MPI runs with MPI_THREAD_MULTIPLE (ringscope asks for it at init)."""
    if not is_initialized():
        raise ValueError("collectives.torch has not been initialized; call init() first")
    from mpi4py import MPI
    return MPI.Query_thread() == MPI.THREAD_MULTIPLE


def gloo_built() -> bool:
    return dist.is_available() and dist.is_gloo_available()


def gloo_enabled() -> bool:
    """Whether gloo carries the tensors in this run (RINGSCOPE_BACKEND=gloo); the controller is
    always MPI."""
    return is_initialized() and get_engine().config.backend == "gloo"


def ccl_built() -> bool:
    """ringscope has no oneCCL backend."""
    return False


def ddl_built() -> bool:
    """ringscope has no IBM DDL backend."""
    return False


def rocm_built() -> bool:
    """Whether torch was built for ROCm (its GPU tensors then go through RCCL as ``nccl``)."""
    return torch.version.hip is not None


def nccl_built() -> bool:
    return dist.is_available() and dist.is_nccl_available()


def cuda_built() -> bool:
    return torch.version.cuda is not None
