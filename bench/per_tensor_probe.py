"""CPU per tensor on each thread: K in-place allreduces of small tensors and their synchronize, a step.

Run under ``mpiexec -n N .venv/bin/python -m bench.per_tensor_probe [--api torch|numpy]``. Each rank
prints one JSON line: the user's (submitting) thread's and the engine thread's CPU time per tensor,
from /proc/self/task/<tid>/stat over the measured steps (after warm-up steps), and the part of it
spent in the kernel (``*_sys_us``: futex waits and wakes, yields). Under
``valgrind --tool=callgrind --separate-threads=yes`` two runs with different ``--steps`` give the
instructions a step costs on each thread (their difference), which repeat under load where CPU
seconds do not (bench/README.md, "CPU per tensor").
"""
from __future__ import annotations

import argparse
import json
import os
import threading


def thread_cpu_s(tid: int) -> tuple[float, float]:
    """(utime, stime) of one thread of this process, in seconds."""
    with open(f"/proc/self/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tck, int(fields[12]) / tck


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--api", choices=("torch", "numpy"), default="torch")
    p.add_argument("--tensors", type=int, default=92)
    p.add_argument("--floats", type=int, default=16)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    a = p.parse_args(argv)
    if a.api == "torch":
        import torch

        import collectives.torch as hvd
        torch.set_num_threads(1)
        tensors = [torch.ones(a.floats) for _ in range(a.tensors)]
    else:
        import numpy as np

        import collectives as hvd  # type: ignore[no-redef]
        tensors = [np.ones(a.floats, dtype=np.float32) for _ in range(a.tensors)]
    hvd.init()
    from collectives.engine import get_engine
    names = [f"g{i}" for i in range(a.tensors)]

    def step():
        handles = [hvd.allreduce_async_(t, name=n) for t, n in zip(tensors, names)]
        for h in handles:
            hvd.synchronize(h)

    for _ in range(a.warmup):
        step()
    hvd.barrier()
    user, engine = threading.get_native_id(), get_engine()._thread.native_id
    u0, e0 = thread_cpu_s(user), thread_cpu_s(engine)
    for _ in range(a.steps):
        step()
    u1, e1 = thread_cpu_s(user), thread_cpu_s(engine)
    n = a.steps * a.tensors

    def us(t1, t0, k=None):
        return round(sum(t1[i] - t0[i] for i in ((0, 1) if k is None else (k,))) / n * 1e6, 2)

    print(json.dumps({"rank": hvd.rank(), "size": hvd.size(), "api": a.api, "tensors": n,
                      "user_us": us(u1, u0), "engine_us": us(e1, e0),
                      "user_sys_us": us(u1, u0, 1), "engine_sys_us": us(e1, e0, 1)}), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
