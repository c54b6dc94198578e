"""Checks for RINGSCOPE_BACKEND=gloo: CPU tensors really travel through torch's gloo groups."""
import torch

import collectives.torch as hvd
from collectives.backends.registry import get_backend
from collectives.engine import get_engine
from collectives.process_sets import TABLE


def check_gloo_group_carries_the_ops():
    if get_engine().config.backend != "gloo":
        return "RINGSCOPE_BACKEND=gloo was not picked up"
    backend = get_backend("gloo", get_engine().config)
    pg = TABLE.get(0).backend_state.get("gloo")
    if pg is None or "Gloo" not in type(pg).__name__:
        return f"no gloo process group on the global set (got {type(pg).__name__})"
    if pg.rank() != hvd.rank() or pg.size() != hvd.size():
        return f"gloo group rank/size {pg.rank()}/{pg.size()} != MPI {hvd.rank()}/{hvd.size()}"
    calls = []
    real = backend.finish
    backend.finish = lambda work, buf: (calls.append(type(work).__name__), real(work, buf))[1]
    try:
        out = hvd.allreduce(torch.full((1000,), float(hvd.rank())), op=hvd.Sum, name="gloo.sum")
    finally:
        backend.finish = real
    want = float(sum(range(hvd.size())))
    if not torch.all(out == want):
        return f"gloo allreduce gave {out[:3]}, want {want}"
    return None if calls else "the allreduce did not go through the gloo group"


CHECKS = [check_gloo_group_carries_the_ops]
