"""MPI worker run unchanged on ringscope and on Horovod 0.28.1 (the ``horovod`` bench group).

    mpiexec -n N python bench/yardstick_worker.py {ringscope|horovod} train [--steps S]
    mpiexec -n N python bench/yardstick_worker.py {ringscope|horovod} burst [--reps R]

The runtime is the first argument: ``import collectives.torch as hvd`` or ``import horovod.torch as
hvd``; nothing else differs. ``train``: an MLP with 92 gradient tensors (46 Linear layers), synthetic
data, SGD in ``DistributedOptimizer``; each step starts after a yielding barrier and its time is the
slowest rank's. ``burst``: 256 ``allreduce_async`` of 16 KiB then ``synchronize``, interleaved rep
by rep with one allreduce of their 4 MiB (fusion on or off comes from ``HOROVOD_FUSION_THRESHOLD``,
set by the driver for the whole job). Rank 0 prints ``BENCH_JSON {...}``.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mpi4py import MPI  # noqa: E402

from bench import mpi_side  # noqa: E402
from bench.launch import emit  # noqa: E402

MODULE = {"ringscope": "collectives.torch", "horovod": "horovod.torch"}
DEPTH, WIDTH, CLASSES, BATCH = 46, 256, 10, 64


def make_train_step(hvd, torch):
    """One step of the MLP (46 Linear layers of WIDTH: 92 gradients, ~3 M parameters)."""
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)
    layers: list = []
    for _ in range(DEPTH - 1):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(WIDTH, CLASSES))
    assert sum(1 for p in model.parameters()) == 2 * DEPTH
    opt = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size(), momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    gen = torch.Generator().manual_seed(1000 + hvd.rank())
    x = torch.randn(BATCH, WIDTH, generator=gen)
    y = torch.randint(0, CLASSES, (BATCH,), generator=gen)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runtime", choices=sorted(MODULE))
    ap.add_argument("what", choices=("train", "burst"))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--block-s", type=float, default=0.2)
    ns = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    hvd = importlib.import_module(MODULE[ns.runtime])
    hvd.init()
    comm = MPI.COMM_WORLD.Dup()
    out: dict = {"runtime": ns.runtime, "what": ns.what, "ranks": comm.size}
    if ns.what == "train":
        step = make_train_step(hvd, torch)
        for _ in range(ns.warmup):
            step()
        out["step_s"] = [mpi_side.timed_block(comm, step, 1) for _ in range(ns.steps)]
    else:
        small = [torch.zeros(4096) for _ in range(256)]
        big = torch.zeros(256 * 4096)

        def burst():
            hs = [hvd.allreduce_async(t, name=f"burst.{i}", op=hvd.Sum) for i, t in enumerate(small)]
            for h in hs:
                hvd.synchronize(h)

        def single():
            hvd.allreduce(big, name="single", op=hvd.Sum)

        fns = {"burst": burst, "single": single}
        iters = {k: mpi_side.calibrate(comm, f, ns.block_s, max_iters=200) for k, f in fns.items()}
        times: dict = {k: [] for k in fns}
        for rep in range(ns.reps):
            for k in (("burst", "single") if rep % 2 == 0 else ("single", "burst")):
                times[k].append(mpi_side.timed_block(comm, fns[k], iters[k]))
        out.update(times=times, iters=iters)
    mpi_side.barrier(comm)
    hvd.shutdown()
    if comm.rank == 0:
        emit(out)
    return 0


if __name__ == "__main__":
    mpi_side.run_main(main)
