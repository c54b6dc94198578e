"""A real CPU DDP job: torch.distributed gloo on 2 ranks (spawned processes), profiled with
torch.profiler's schedule and tensorboard_trace_handler, one Kineto trace per rank.

    python -m tests.kineto.ddp_job OUT_DIR [--steps N] [--world W] [--late-rank R --late-ms MS]

``--late-rank``: that rank sleeps ``--late-ms`` before each backward and before the loss's allreduce, so it
launches every collective last.
"""
from __future__ import annotations

import argparse
import os
import socket
import time


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, out: str, steps: int, port: int, late_rank: int = -1, late_ms: float = 0.0) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64)),
                bucket_cap_mb=0.25)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 256), torch.randn(32, 64)
    sched = schedule(wait=1, warmup=1, active=steps)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched, record_shapes=True,
                 on_trace_ready=tensorboard_trace_handler(out, worker_name=f"worker{rank}")) as prof:
        for _ in range(steps + 2):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            late = late_ms / 1e3 if rank == late_rank else 0.0
            time.sleep(late)
            loss.backward()
            time.sleep(late)
            dist.all_reduce(loss.detach())   # the loss averaged for logging: a direct collective
            opt.step()
            prof.step()
    dist.destroy_process_group()


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--late-rank", type=int, default=-1)
    p.add_argument("--late-ms", type=float, default=0.0)
    a = p.parse_args(argv)
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(a.world, a.out, a.steps, _free_port(), a.late_rank, a.late_ms), nprocs=a.world, join=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
