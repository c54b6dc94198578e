"""One torchrun job of bench/ddp_overhead.py: a DDP MLP (gloo, CPU) trained for warm-up + N steps; rank 0
prints ``BENCH_JSON`` with each step's seconds, wall and CPU. ``off``: plain DDP; ``on``: hvd.timeline.watch(ddp) (the
driver sets RINGSCOPE_TIMELINE); ``ab``: a watched and a plain copy of the model, stepped in turn in the
same job (timeline on), each step's seconds per copy."""
from __future__ import annotations

import json
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import collectives.torch as hvd

WIDTH, LAYERS, BATCH, BUCKET_CAP_MB = 512, 8, 64, 2   # 8 MiB of gradients in ~4 buckets


def _model() -> tuple[DistributedDataParallel, torch.optim.Optimizer]:
    torch.manual_seed(0)
    layers = [m for _ in range(LAYERS) for m in (torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU())]
    ddp = DistributedDataParallel(torch.nn.Sequential(*layers), bucket_cap_mb=BUCKET_CAP_MB)
    return ddp, torch.optim.SGD(ddp.parameters(), lr=1e-3)


def _step(ddp, opt, x) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds: every thread, gloo's and the tracer's too)."""
    t0, c0 = time.perf_counter(), time.process_time()
    loss = ddp(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return time.perf_counter() - t0, time.process_time() - c0


def main(mode: str, steps: int, warmup: int = 10) -> None:
    dist.init_process_group("gloo")
    x = torch.randn(BATCH, WIDTH)
    a = _model()
    if mode in ("on", "ab"):
        hvd.timeline.watch(a[0])
    elif mode == "pyhook":   # torch's allreduce_hook, in Python, without the watch
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        a[0].register_comm_hook(None, default_hooks.allreduce_hook)
    b = _model() if mode in ("ab", "pyhook") else None
    times: dict[str, list[float]] = {"a": [], "b": [], "a_cpu": [], "b_cpu": []}
    for i in range(warmup + steps):
        if b is not None and i % 2:   # each copy goes first every other step
            tb, ta = _step(*b, x), _step(*a, x)
        else:
            ta = _step(*a, x)
            tb = _step(*b, x) if b is not None else None
        if i >= warmup:
            for k, t in (("a", ta), ("b", tb)):
                if t is not None:
                    times[k].append(t[0])
                    times[k + "_cpu"].append(t[1])
    if dist.get_rank() == 0:
        print("BENCH_JSON " + json.dumps({"mode": mode, **times}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
