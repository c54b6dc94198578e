"""The training job behind ``ringscope demo``: a small model on synthetic data, one scenario.

Run on N ranks: ``python -m collectives.launcher -np 4 --timeline RUN_DIR/ collectives/torch/demo_train.py
--scenario straggler`` (or ``mpiexec -n 4 python -m collectives.torch.demo_train ...``).

Scenarios: healthy; straggler (one rank sleeps extra every step, outside any phase); tiny-tensors
(~400 small gradients, meant for a small fusion threshold); large-tensors (a few 4-16 MiB gradients);
hang (one rank skips one collective; with RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS set, every rank stops
with the stall error instead of hanging); slow-data (one rank's loader sleeps before each batch);
cpu-contention (one rank shares its core with busy processes, so its forward and backward are slower).

The loop is annotated with ``hvd.timeline``: the loader is wrapped (DATA_WAIT), the model watched
(FORWARD) and the loss is a region; DistributedOptimizer adds BACKWARD and OPTIMIZER_STEP.
Run as a file, torch (and collectives.torch) is imported only once the arguments are parsed.
"""
from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:
    # run as a file: this directory must not shadow top-level modules (setup, functions, ...)
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

import argparse  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

SCENARIOS = {  # scenario -> model kind
    "healthy": "mixed", "straggler": "mixed", "tiny-tensors": "tiny", "large-tensors": "large",
    "hang": "mixed", "slow-data": "mixed", "cpu-contention": "mixed",
}
# a busy process: spins until its parent (the rank) is gone, however the rank ends
_SPIN = ("import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n"
         "    for _ in range(100000):\n        pass\n")
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
    p.add_argument("--slow-rank", type=int, default=2,
                   help="slow-data / cpu-contention: the rank affected (modulo the size; default 2)")
    p.add_argument("--data-delay-ms", type=float, default=40.0, help="slow-data: sleep per batch")
    p.add_argument("--busy-procs", type=int, default=5,
                   help="cpu-contention: busy processes sharing the slow rank's core")
    ns = p.parse_args(argv)
    if ns.steps < 1:
        p.error("--steps must be at least 1")
    return ns


def share_cores(busy: int) -> list[subprocess.Popen]:
    """Pin every thread of this process to one core and start ``busy`` spinning processes pinned
    to the same core: from now on this rank gets about 1/(busy+1) of it, whatever the load balancer
    does with the other ranks. The caller stops them (they also stop when this process ends)."""
    cores = sorted(os.sched_getaffinity(0))
    core = {cores[-1]}
    for tid in os.listdir("/proc/self/task"):   # the engine's and the tracer's threads too
        try:
            os.sched_setaffinity(int(tid), core)
        except OSError:   # a thread that ended meanwhile
            pass
    procs = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(busy)]
    for p in procs:
        os.sched_setaffinity(p.pid, core)
    return procs


def _train(ns, hvd, torch):
    from collectives.torch import demo_model
    rank, size = hvd.rank(), hvd.size()
    slow = ns.straggler_rank % size
    skipper = ns.hang_rank % size
    affected = rank == ns.slow_rank % size
    model = demo_model.build(SCENARIOS[ns.scenario], seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=ns.lr * size, momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    delay = ns.data_delay_ms / 1000.0 if ns.scenario == "slow-data" and affected else 0.0
    batches = demo_model.SyntheticBatches(model, ns.batch_size, ns.steps, seed=1000 + rank,
                                          delay_s=delay)
    loader = hvd.timeline.wrap_loader(torch.utils.data.DataLoader(batches, batch_size=None))
    hvd.timeline.watch(model)
    if rank == 0:
        n_grads = sum(1 for p in model.parameters() if p.requires_grad)
        mib = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
        print(f"[demo] scenario {ns.scenario}: {size} ranks, {n_grads} gradient tensors "
              f"({mib:.1f} MiB per step), {ns.steps} steps", flush=True)
    t0 = time.perf_counter()
    for step, (x, y) in enumerate(loader):
        if ns.scenario == "straggler" and rank == slow:
            time.sleep(ns.straggler_ms / 1000.0)        # late for an unrecorded reason
        opt.zero_grad()
        out = model(x)
        with hvd.timeline.region("loss"):
            loss = torch.nn.functional.cross_entropy(out, y)
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
    busy = share_cores(ns.busy_procs) if ns.scenario == "cpu-contention" and \
        hvd.rank() == ns.slow_rank % hvd.size() else []
    try:
        _train(ns, hvd, torch)
    except Exception as exc:
        print(f"[demo] rank {hvd.rank()}: stopped: {type(exc).__name__}: {exc}", file=sys.stderr,
              flush=True)
        hvd.shutdown()
        return EXIT_STALLED
    finally:
        for p in busy:
            p.kill()
            p.wait()
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
