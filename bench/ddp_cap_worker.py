"""One torchrun job of bench/ddp_bucket_cap.py: a DDP MLP of argv[3] layers argv[4] wide (gloo, CPU), watched,
with ``bucket_cap_mb`` = argv[1], trained for warm-up + argv[2] steps; rank 0 prints ``BENCH_JSON`` with each
timed step's seconds. The driver sets RINGSCOPE_TIMELINE."""
from __future__ import annotations

import json
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import collectives.torch as hvd

BATCH = 64


def main(cap_mb: float, steps: int, layers: int, width: int, warmup: int = 5) -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    layers = [m for _ in range(layers) for m in (torch.nn.Linear(width, width), torch.nn.ReLU())]
    ddp = DistributedDataParallel(torch.nn.Sequential(*layers), bucket_cap_mb=cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    hvd.timeline.watch(ddp, optimizer=opt)
    x = torch.randn(BATCH, width)
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
    main(float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
