"""``hvd.timeline``: :mod:`collectives.timeline`'s phases and regions, ``profile()``
(:mod:`collectives.torch.profile`: torch.profiler's Kineto traces beside ours), and ``watch`` that
also traces a DistributedDataParallel module's buckets and phases (:mod:`collectives.torch.ddp`)."""
from __future__ import annotations

import torch
from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel
from torch.nn.parallel import DistributedDataParallel

from collectives import timeline as _timeline
from collectives.timeline import TimedLoader, Watch, checkpoint, close_span, open_span, region, wrap_loader
from collectives.torch.profile import profile

__all__ = ["region", "checkpoint", "wrap_loader", "watch", "profile", "TimedLoader", "Watch", "open_span", "close_span"]


def watch(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> Watch:
    """FORWARD for each call of ``model`` (the root module); given a DistributedDataParallel module, or an
    FSDP root module (FSDP2's ``fully_shard``, or FSDP1's FullyShardedDataParallel), also its buckets (DDP),
    the torch.distributed collectives called while it is watched, BACKWARD and OPTIMIZER_STEP (of
    ``optimizer``, else of the optimizer found stepping its parameters), starting the timeline without
    ``hvd.init()`` (docs/DDP.md). Returns the removable handle."""
    if isinstance(model, (DistributedDataParallel, FSDPModule, FullyShardedDataParallel)):
        from collectives.torch.ddp import DdpWatch
        return DdpWatch(model, optimizer)
    if optimizer is not None:
        raise ValueError("hvd.timeline.watch: optimizer= applies to a DistributedDataParallel or FSDP module "
                         "(DistributedOptimizer records its own steps)")
    return _timeline.watch(model)
