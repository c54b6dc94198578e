"""``gloo`` backend: CPU tensors through torch's gloo (``RINGSCOPE_BACKEND=gloo``), for comparing
against ringscope's own ring. One gloo process group per process set, made from the rendezvous
store; gloo's ``wait`` sleeps on a condition variable, so it never busy-spins."""
from __future__ import annotations

import torch.distributed as dist

from collectives.torch import rendezvous
from collectives.torch.backends.dist import GroupSpec, TorchDistBackend
from tracer import vocab as V


def gloo_options(spec: GroupSpec, host: str):
    """The ProcessGroupGloo options: the device bound to ``host``, the rendezvous timeout."""
    opts = dist.ProcessGroupGloo._Options()
    opts._timeout = rendezvous.timeout()
    opts._devices = [dist.ProcessGroupGloo.create_device(hostname=host)]
    return opts


class GlooBackend(TorchDistBackend):
    name = "gloo"
    names = {"allreduce": V.GLOO_ALLREDUCE, "allgather": V.GLOO_ALLGATHER,
             "broadcast": V.GLOO_BCAST, "alltoall": V.GLOO_ALLTOALL,
             "reducescatter": V.GLOO_REDUCESCATTER, "barrier": V.GLOO_BARRIER}

    def make_group(self, spec: GroupSpec):
        if not dist.is_gloo_available():
            raise RuntimeError("RINGSCOPE_BACKEND=gloo, but this torch build has no gloo")
        store = dist.PrefixStore(spec.prefix, rendezvous.store())
        return dist.ProcessGroupGloo(store, spec.rank, spec.size,
                                     gloo_options(spec, rendezvous.address()))

