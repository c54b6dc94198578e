"""The DDP job tests/torch/test_ddp.py launches with torchrun (gloo, CPU): the same tiny model trained
five times from the same seed and data: plain DDP, DDP with fp16_compress_hook, then both again
watched (the hook registered before the watch), and fp16 registered after the watch, with
RINGSCOPE_TIMELINE set by the test; then, traced into OUT/small_cap/, a model of many small layers with a
bucket cap far too small for it; then a planted hang (rank 1 skips an all_reduce) and each rank's
Flight Recorder dump, in OUT/fr/; then, traced into OUT/fsdp/, the model as FSDP2 units, then as FSDP1
units (each also trained before any watch), and each raw collective a watch records. Writes each run's
parameters, the step ranges each watched run had, the groups' names, and whether the last trace was
complete right after destroy_process_group(), to OUT (argv[1])."""
from __future__ import annotations

import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard
from torch.distributed.fsdp.wrap import ModuleWrapPolicy
from torch.nn.parallel import DistributedDataParallel

SKEW_US = 250_000   # rank 1's wall clock runs ahead by this (read when tracer.clock is imported)
if os.environ.get("RANK") == "1":
    os.environ["RINGSCOPE_TEST_CLOCK_SKEW_US"] = str(SKEW_US)

import collectives.torch as hvd  # noqa: E402  (after the skew is set)
import tracer  # noqa: E402

STEPS = 4
WATCH_S: list[float] = []   # each watch's seconds (the first starts the timeline and measures the clocks)
BUCKET_CAP_MB = 0.01   # 10 KiB: the model's 26 KiB of gradients in several buckets
FSDP_DIR, RAW_NUMEL = "fsdp", 6
FR_DIR, HANG_RANK, HANG_NUMEL, HANG_TIMEOUT_S = "fr", 1, 99, 2   # the planted hang
SMALL_CAP_DIR, SMALL_LAYERS, SMALL_WIDTH, SMALL_CAP_MB = "small_cap", 16, 32, 0.001   # 66 KiB in 1 KiB buckets


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


def small_cap(rank: int) -> None:
    """A model of many small parameters with a bucket cap far below it: a bucket per layer."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(SMALL_WIDTH, SMALL_WIDTH) for _ in range(SMALL_LAYERS)])
    ddp = DistributedDataParallel(net, bucket_cap_mb=SMALL_CAP_MB)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    hvd.timeline.watch(ddp, optimizer=opt)
    g = torch.Generator().manual_seed(1 + rank)
    for _ in range(STEPS):
        ddp(torch.randn(8, SMALL_WIDTH, generator=g)).square().mean().backward()
        opt.step()
        opt.zero_grad()


def fsdp(rank: int, watched: bool) -> tuple[list, list]:
    """FSDP2: each layer of :func:`model` a ``fully_shard`` unit, then the root; this rank's shards after."""
    net = model()
    for layer in net:
        if any(True for _ in layer.parameters()):
            fully_shard(layer)
    fully_shard(net)
    first, last = _train_sharded(net, rank, watched)
    return [p.to_local().detach().clone() for p in net.parameters()], [first, last]


def fsdp1(rank: int, watched: bool) -> tuple[list, list]:
    """FSDP1: FullyShardedDataParallel with each Linear a unit (CPU); this rank's flat shards after."""
    net = FullyShardedDataParallel(model(), auto_wrap_policy=ModuleWrapPolicy({torch.nn.Linear}),
                                   device_id=torch.device("cpu"))
    first, last = _train_sharded(net, rank, watched)
    return [p.detach().clone() for p in net.parameters()], [first, last]


def _train_sharded(net, rank: int, watched: bool) -> tuple[int, int]:
    """Train ``net`` on this rank's batches, watched or not; the recorder's step before and after."""
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    if watched:
        hvd.timeline.watch(net, optimizer=opt)
    first = tracer.get_recorder().step
    for x, y in batches(rank):
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
        opt.zero_grad()
    return first, tracer.get_recorder().step


def raw_collectives(rank: int) -> dict:
    """Each collective a watch records, on the default group, and an async all_reduce on a group of its
    own (its arguments by position); returns the groups' names."""
    t = torch.full((RAW_NUMEL,), float(rank))
    dist.all_reduce(t)
    dist.all_gather_into_tensor(torch.zeros(RAW_NUMEL * dist.get_world_size()), t)
    dist.reduce_scatter_tensor(torch.zeros(RAW_NUMEL // dist.get_world_size()), t)
    dist.broadcast(t, 0)
    dist.barrier()
    group = dist.new_group()
    dist.all_reduce(t, dist.ReduceOp.SUM, group, True).wait()   # group and async_op by position
    return {"default": dist.distributed_c10d._get_default_group().group_name, "own": group.group_name}


def planted_hang(rank: int, fr_dir: str) -> None:
    """Over a group of its own, rank 1 skips the second all_reduce, which rank 0 waits for until the group's
    timeout; then each rank writes torch's Flight Recorder dump (TORCH_FR_BUFFER_SIZE, set by the test) to
    FR_DIR/rank_<rank>, as torch's dump-on-timeout names them."""
    group = dist.new_group(timeout=datetime.timedelta(seconds=HANG_TIMEOUT_S))
    dist.all_reduce(torch.ones(HANG_NUMEL), group=group)
    if rank != HANG_RANK:
        try:
            dist.all_reduce(torch.ones(HANG_NUMEL), group=group)
        except RuntimeError:
            pass   # the timeout: the collective the other rank skipped
    os.makedirs(fr_dir, exist_ok=True)
    with open(os.path.join(fr_dir, f"rank_{rank}"), "wb") as f:
        f.write(torch._C._distributed_c10d._dump_fr_trace())
    dist.barrier()


def main(out: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    params, steps = {}, {}
    params["fsdp"], steps["fsdp"] = fsdp(rank, watched=False)   # before any watch: nothing recorded
    params["fsdp1"], steps["fsdp1"] = fsdp1(rank, watched=False)
    for name, fp16, watched in (("plain", False, False), ("fp16", True, False), ("plain_watched", False, True),
                                ("fp16_watched", True, True)):
        params[name], steps[name] = train(rank, fp16, watched)
    params["fp16_after_watch"], steps["fp16_after_watch"] = train(rank, True, True, hook_after=True)
    tracer.close()   # the next run in a folder of its own: its summary is about it alone
    tracer.start_timeline(os.path.join(out, SMALL_CAP_DIR) + "/")
    small_cap(rank)
    tracer.close()
    planted_hang(rank, os.path.join(out, FR_DIR))
    tracer.start_timeline(os.path.join(out, FSDP_DIR) + "/")
    params["fsdp_watched"], steps["fsdp_watched"] = fsdp(rank, watched=True)
    params["fsdp1_watched"], steps["fsdp1_watched"] = fsdp1(rank, watched=True)
    groups = raw_collectives(rank)
    torch.save(params, os.path.join(out, f"params.{rank}.pt"))
    trace = os.path.join(out, FSDP_DIR, f"rank-{rank:05d}.json")
    dist.destroy_process_group()
    with open(trace) as f:
        closed = "ringscope.shutdown" in f.read()
    with open(os.path.join(out, f"result.{rank}.json"), "w") as f:
        json.dump({"steps": steps, "closed_at_destroy": closed, "watch_s": WATCH_S, "groups": groups}, f)


if __name__ == "__main__":
    main(sys.argv[1])
