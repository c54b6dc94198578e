"""One torchrun job of bench/ddp_bucket_cap.py: a DDP MLP of argv[3] layers (gloo, CPU), watched, with
``bucket_cap_mb`` = argv[1], trained for warm-up + argv[2] steps; rank 0 prints ``BENCH_JSON`` with each
timed step's seconds. argv[4]: the layers' widths, one (``128``) or a cycle (``128,256,64``: layer i maps
width i to width i+1, so the parameters differ in size). The driver sets RINGSCOPE_TIMELINE."""
from __future__ import annotations

import json
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import collectives.torch as hvd

BATCH = 64


def main(cap_mb: float, steps: int, layers: int, widths: list[int], warmup: int = 5) -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    w = [widths[i % len(widths)] for i in range(layers + 1)]
    mods = [m for i in range(layers) for m in (torch.nn.Linear(w[i], w[i + 1]), torch.nn.ReLU())]
    ddp = DistributedDataParallel(torch.nn.Sequential(*mods), bucket_cap_mb=cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    hvd.timeline.watch(ddp, optimizer=opt)
    x = torch.randn(BATCH, w[0])
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        loss = ddp(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    if dist.get_rank() == 0:
        print("BENCH_JSON " + json.dumps({"cap_mb": cap_mb, "step_s": times}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), [int(v) for v in sys.argv[4].split(",")])
