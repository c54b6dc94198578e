"""The DDP job tests/torch/test_ddp.py launches with torchrun (gloo, CPU): the same tiny model trained
five times from the same seed and data: plain DDP, DDP with fp16_compress_hook, then both again
watched (the hook registered before the watch), and fp16 registered after the watch, with
RINGSCOPE_TIMELINE set by the test. Writes each
run's parameters, the step ranges each watched run had, and whether the trace was complete right
after destroy_process_group(), to OUT (argv[1])."""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

SKEW_US = 250_000   # rank 1's wall clock runs ahead by this (read when tracer.clock is imported)
if os.environ.get("RANK") == "1":
    os.environ["RINGSCOPE_TEST_CLOCK_SKEW_US"] = str(SKEW_US)

import collectives.torch as hvd  # noqa: E402  (after the skew is set)
import tracer  # noqa: E402

STEPS = 4
WATCH_S: list[float] = []   # each watch's seconds (the first starts the timeline and measures the clocks)
BUCKET_CAP_MB = 0.01   # 10 KiB: the model's 26 KiB of gradients in several buckets


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 4))


def batches(rank: int) -> list:
    g = torch.Generator().manual_seed(1 + rank)
    return [(torch.randn(16, 32, generator=g), torch.randn(16, 4, generator=g)) for _ in range(STEPS)]


def train(rank: int, fp16: bool, watched: bool, hook_after: bool = False) -> tuple[list, list]:
    net = model()
    ddp = DistributedDataParallel(net, bucket_cap_mb=BUCKET_CAP_MB)
    if fp16 and not hook_after:
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    t0 = time.perf_counter()
    handle = hvd.timeline.watch(ddp) if watched else None
    WATCH_S.append(time.perf_counter() - t0)
    if hook_after:
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    first = tracer.get_recorder().step
    for x, y in hvd.timeline.wrap_loader(batches(rank)) if watched else batches(rank):
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if handle is not None:
        handle.remove()
    return [p.detach().clone() for p in net.parameters()], [first, tracer.get_recorder().step]


def main(out: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    params, steps = {}, {}
    for name, fp16, watched in (("plain", False, False), ("fp16", True, False), ("plain_watched", False, True),
                                ("fp16_watched", True, True)):
        params[name], steps[name] = train(rank, fp16, watched)
    params["fp16_after_watch"], steps["fp16_after_watch"] = train(rank, True, True, hook_after=True)
    torch.save(params, os.path.join(out, f"params.{rank}.pt"))
    trace = os.path.join(os.environ["RINGSCOPE_TIMELINE"], f"rank-{rank:05d}.json")
    dist.destroy_process_group()
    with open(trace) as f:
        closed = "ringscope.shutdown" in f.read()
    with open(os.path.join(out, f"result.{rank}.json"), "w") as f:
        json.dump({"steps": steps, "closed_at_destroy": closed, "watch_s": WATCH_S}, f)


if __name__ == "__main__":
    main(sys.argv[1])
