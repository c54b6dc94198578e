"""The training job behind ``ringscope demo``: a small model on synthetic data, one scenario.

Run on N ranks: ``python -m collectives.launcher -np 4 --timeline RUN_DIR/ collectives/torch/demo_train.py
--scenario straggler`` (or ``mpiexec -n 4 python -m collectives.torch.demo_train ...``).

Scenarios: healthy; straggler (one rank sleeps extra every step); tiny-tensors (~400 small gradients,
meant for a small fusion threshold); large-tensors (a few 4-16 MiB gradients); hang (one rank skips
one collective; with RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS set, every rank stops with the stall
error instead of hanging).
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

SCENARIOS = {  # scenario -> model kind
    "healthy": "mixed", "straggler": "mixed", "tiny-tensors": "tiny", "large-tensors": "large",
    "hang": "mixed",
}
EXIT_STALLED = 3


def parse(argv):
    p = argparse.ArgumentParser(prog="demo_train", description=__doc__.split("\n")[0])
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="healthy")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.0025, help="per-rank learning rate (scaled by size)")
    p.add_argument("--straggler-rank", type=int, default=-1, help="default: the last rank")
    p.add_argument("--straggler-ms", type=float, default=60.0)
    p.add_argument("--hang-rank", type=int, default=-1, help="default: the last rank")
    p.add_argument("--hang-step", type=int, default=3)
    ns = p.parse_args(argv)
    if ns.steps < 1:
        p.error("--steps must be at least 1")
    return ns


def _train(ns, hvd, torch):
    from collectives.torch import demo_model
    rank, size = hvd.rank(), hvd.size()
    slow = ns.straggler_rank % size
    skipper = ns.hang_rank % size
    model = demo_model.build(SCENARIOS[ns.scenario], seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=ns.lr * size, momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    gen = torch.Generator().manual_seed(1000 + rank)
    if rank == 0:
        n_grads = sum(1 for p in model.parameters() if p.requires_grad)
        mib = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
        print(f"[demo] scenario {ns.scenario}: {size} ranks, {n_grads} gradient tensors "
              f"({mib:.1f} MiB per step), {ns.steps} steps", flush=True)
    t0 = time.perf_counter()
    for step in range(ns.steps):
        x, y = demo_model.synthetic_batch(model, ns.batch_size, gen)
        if ns.scenario == "straggler" and rank == slow:
            time.sleep(ns.straggler_ms / 1000.0)        # e.g. a slow data loader on one rank
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        # per-step metric averaging, as training scripts do for logging; in the hang scenario one
        # rank skips it once, so the others wait for a tensor that never comes
        if ns.scenario == "hang" and rank == skipper and step == ns.hang_step:
            continue
        avg = hvd.allreduce(loss.detach(), name="loss")
        if rank == 0 and (step % 5 == 0 or step == ns.steps - 1):
            print(f"[demo] step {step:3d}  loss {avg.item():.4f}", flush=True)
    if rank == 0:
        dt = time.perf_counter() - t0
        print(f"[demo] {ns.steps} steps in {dt:.2f}s ({dt / ns.steps * 1000:.1f} ms/step)",
              flush=True)


def main(argv=None) -> int:
    ns = parse(sys.argv[1:] if argv is None else argv)
    import torch

    import collectives.torch as hvd
    torch.set_num_threads(1)          # ranks share the cores; one compute thread each
    hvd.init()
    try:
        _train(ns, hvd, torch)
    except Exception as exc:
        print(f"[demo] rank {hvd.rank()}: stopped: {type(exc).__name__}: {exc}", file=sys.stderr,
              flush=True)
        hvd.shutdown()
        return EXIT_STALLED
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
