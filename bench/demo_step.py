"""The demo's training step for the measuring workers (after ``hvd.init()``).

The step of ``collectives/torch/demo_train.py`` (healthy scenario): the demo's model (``demo_model``,
``mixed``: ~130 gradients from a few hundred bytes to 4 MiB), SGD with momentum in
``DistributedOptimizer``, synthetic batches, and the per-step loss allreduce; one compute thread per
rank.
"""
from __future__ import annotations


def make_step(model_name: str = "mixed", batch: int = 32):
    """A callable running one training step on this rank (collectives.torch initialised)."""
    import torch
    import torch.nn.functional as F

    import collectives.torch as hvd
    from collectives.torch import demo_model
    torch.set_num_threads(1)
    model = demo_model.build(model_name, seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.0025 * hvd.size(), momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    gen = torch.Generator().manual_seed(1000 + hvd.rank())

    def step():
        x, y = demo_model.synthetic_batch(model, batch, gen)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        hvd.allreduce(loss.detach(), name="loss")

    return step


def main() -> int:
    """MPI worker: the demo step's median time on ``--tree``'s code (bench/demo_pair.py)."""
    import argparse
    import sys
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", required=True, help="the checkout whose runtime runs the steps")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=4)
    ns = ap.parse_args()
    sys.path.insert(0, ns.tree)
    for mod in [m for m in sys.modules if m == "bench" or m.startswith("bench.")]:
        del sys.modules[mod]   # the tree's own bench helpers and demo step
    import time

    from mpi4py import MPI

    import collectives.torch as hvd
    from bench import mpi_side
    from bench.demo_step import make_step
    from bench.launch import emit
    hvd.init()
    comm = MPI.COMM_WORLD.Dup()
    step = make_step()
    for _ in range(ns.warmup):
        step()
    times = []
    cpu0 = time.process_time()
    for _ in range(ns.steps):
        mpi_side.barrier(comm)
        t0 = time.perf_counter()
        step()
        times.append(float(mpi_side.reduce_max(comm, [time.perf_counter() - t0])[0]))
    import numpy as np
    cpu = np.array([time.process_time() - cpu0])
    total = np.empty_like(cpu)
    mpi_side.wait(comm.Iallreduce(cpu, total, MPI.SUM))
    hvd.shutdown()
    if comm.rank == 0:   # cpu_s_per_step: every rank's CPU time (all its threads), summed
        emit({"tree": ns.tree, "ranks": comm.size, "step_s": times,
              "cpu_s_per_step": float(total[0]) / ns.steps})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
