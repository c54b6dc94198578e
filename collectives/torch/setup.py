"""``init``/``shutdown`` for the torch frontend: the engine, plus torch.distributed when a gloo or
NCCL backend will carry tensors (rendezvous over MPI, the global group built eagerly in MPI rank
order). Importing it registers the ``gloo`` and ``nccl`` backends."""
from __future__ import annotations

import torch
import torch.distributed as dist

import collectives as _core
from collectives import process_sets as _ps
from collectives.backends.registry import get_backend, register_backend
from collectives.engine import get_engine
from collectives.torch import rendezvous
from collectives.torch.backends.gloo import GlooBackend
from collectives.torch.backends.nccl import NcclBackend

register_backend("gloo", GlooBackend)
register_backend("nccl", NcclBackend)


def dist_backends(config) -> list[str]:
    """The torch.distributed backends this process will use: gloo when RINGSCOPE_BACKEND=gloo,
    nccl when torch sees a GPU and has NCCL."""
    out = []
    if config.backend == "gloo":
        out.append("gloo")
    if config.backend == "nccl" or (dist.is_available() and dist.is_nccl_available()
                                    and torch.cuda.is_available()):
        out.append("nccl")
    return out


def init(comm=None, process_sets=None) -> None:
    """Start ringscope on this rank (collective: every rank calls it).

    ``comm`` is accepted for Horovod compatibility and must be None (ringscope runs on
    MPI_COMM_WORLD); ``process_sets`` are registered as in ``collectives.init``.
    """
    if _core.is_initialized():
        return
    if comm is not None:
        raise ValueError("init(comm=...) is not supported: ringscope runs on MPI_COMM_WORLD; "
                         "use process_sets= for subsets of ranks")
    _core.init(process_sets=process_sets)
    config = get_engine().config
    backends = dist_backends(config)
    if not backends:
        return
    rendezvous.setup(_core.rank(), _core.size(), _core.local_size() == _core.size())
    for name in backends:
        get_backend(name, config).group(_ps.TABLE.get(0))   # the global group, made now


def shutdown() -> None:
    """Stop the engine on this rank (collective); ``init`` may be called again afterwards."""
    _core.shutdown()
    rendezvous.reset()
