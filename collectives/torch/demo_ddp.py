"""The DDP training job behind ``ringscope demo --ddp``: the demo's mixed model under torch's
DistributedDataParallel on gloo, launched by torchrun, traced by ``hvd.timeline.watch`` (docs/DDP.md).

``RINGSCOPE_TIMELINE=RUN_DIR/ torchrun --standalone --nproc_per_node 4 collectives/torch/demo_ddp.py
--scenario straggler``. Scenarios (as ``demo_train``'s): healthy; straggler (one rank sleeps extra every
step, outside any phase); slow-data (one rank's loader sleeps before each batch); cpu-contention (one
rank shares its core with busy processes); small-buckets (bucket_cap_mb far too small for the model).
Each rank is bound to one core, the local ranks in blocks (4 ranks on 2 cores: 0-1 on the first, 2-3 on
the second), so the scheduler does not move ranks between cores mid-step; the straggler (the last rank)
shares its core with the rank before it, which computes faster while the straggler sleeps.
"""
from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:
    # run as a file: this directory must not shadow top-level modules (setup, functions, ...)
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

import argparse  # noqa: E402
import time  # noqa: E402

SCENARIOS = ("healthy", "straggler", "slow-data", "cpu-contention", "small-buckets")
SMALL_BUCKET_CAP_MB = 0.05


def parse(argv):
    p = argparse.ArgumentParser(prog="demo_ddp", description=__doc__.split("\n")[0])
    p.add_argument("--scenario", choices=SCENARIOS, default="healthy")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--straggler-rank", type=int, default=-1, help="default: the last rank")
    p.add_argument("--straggler-ms", type=float, default=60.0)
    p.add_argument("--slow-rank", type=int, default=2, help="slow-data / cpu-contention: the rank (modulo the size)")
    p.add_argument("--data-delay-ms", type=float, default=40.0)
    p.add_argument("--busy-procs", type=int, default=5)
    ns = p.parse_args(argv)
    if ns.steps < 1:
        p.error("--steps must be at least 1")
    return ns


def main(argv=None) -> int:
    ns = parse(sys.argv[1:] if argv is None else argv)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    import collectives.torch as hvd
    from collectives.torch import demo_model
    from collectives.torch.demo_train import share_cores

    torch.set_num_threads(1)
    cores = sorted(os.sched_getaffinity(0))
    local, local_size = int(os.environ.get("LOCAL_RANK", "0")), int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    os.sched_setaffinity(0, {cores[local * len(cores) // local_size % len(cores)]})   # the threads inherit it
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    affected = rank == ns.slow_rank % size
    busy = share_cores(ns.busy_procs) if ns.scenario == "cpu-contention" and affected else []
    try:
        model = demo_model.build("mixed", seed=0)
        cap = SMALL_BUCKET_CAP_MB if ns.scenario == "small-buckets" else 25.0
        ddp = DistributedDataParallel(model, bucket_cap_mb=cap)
        opt = torch.optim.SGD(ddp.parameters(), lr=ns.lr, momentum=0.9)
        hvd.timeline.watch(ddp, optimizer=opt)
        delay = ns.data_delay_ms / 1000.0 if ns.scenario == "slow-data" and affected else 0.0
        batches = demo_model.SyntheticBatches(model, ns.batch_size, ns.steps, seed=1000 + rank, delay_s=delay)
        loader = hvd.timeline.wrap_loader(torch.utils.data.DataLoader(batches, batch_size=None))
        t0 = time.perf_counter()
        for step, (x, y) in enumerate(loader):
            if ns.scenario == "straggler" and rank == ns.straggler_rank % size:
                time.sleep(ns.straggler_ms / 1000.0)   # late for an unrecorded reason
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == 0 and (step % 5 == 0 or step == ns.steps - 1):
                print(f"[demo] step {step:3d}  loss {loss.item():.4f}", flush=True)
        if rank == 0:
            dt = time.perf_counter() - t0
            print(f"[demo] DDP {ns.scenario}: {size} ranks, {ns.steps} steps in {dt:.2f}s", flush=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
