"""Worker side helpers for MPI measuring jobs: yielding waits, a yielding barrier, timed blocks.

These never use MPICH's blocking calls for synchronisation (they spin at 100 % CPU and would steal
the oversubscribed cores from the ranks doing the work being measured).
"""
from __future__ import annotations

import os
import time

import numpy as np
from mpi4py import MPI


def wait(req) -> None:
    """Test a few times, then yield, then sleep briefly (like ``collectives.mpi_wait``)."""
    n, sleep = 0, 20e-6
    while not req.Test():
        n += 1
        if n < 50:
            continue
        if n < 250:
            os.sched_yield()
            continue
        time.sleep(sleep)
        sleep = min(sleep * 2, 0.5e-3)


def barrier(comm) -> None:
    wait(comm.Ibarrier())


def reduce_max(comm, values) -> np.ndarray:
    """Element-wise max across ranks of a float64 vector (yielding)."""
    send = np.asarray(values, dtype=np.float64)
    recv = np.empty_like(send)
    wait(comm.Iallreduce(send, recv, MPI.MAX))
    return recv


def bcast_obj(comm, obj, root: int = 0):
    """Broadcast a small picklable object without a spinning wait."""
    import pickle
    data = pickle.dumps(obj) if comm.rank == root else b""
    n = np.array([len(data)], dtype=np.int64)
    wait(comm.Ibcast(n, root=root))
    buf = np.frombuffer(data, dtype=np.uint8).copy() if comm.rank == root \
        else np.empty(int(n[0]), dtype=np.uint8)
    wait(comm.Ibcast(buf, root=root))
    return pickle.loads(buf.tobytes())


def timed_block(comm, fn, iters: int) -> float:
    """Seconds per call of ``fn`` over ``iters`` calls, started together after a barrier, the
    slowest rank's figure (what a user waiting on every rank sees)."""
    barrier(comm)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    dt = (time.perf_counter() - t0) / iters
    return float(reduce_max(comm, [dt])[0])


def calibrate(comm, fn, target_s: float, max_iters: int = 2000) -> int:
    """Iterations that make one timed block last about ``target_s`` (same on every rank)."""
    fn()                                   # warm-up: first-touch, buffers, connections
    t = timed_block(comm, fn, 1)
    if t < target_s / 20:
        t = timed_block(comm, fn, max(1, min(max_iters, int(target_s / 20 / max(t, 1e-7)))))
    return int(max(1, min(max_iters, round(target_s / max(t, 1e-9)))))


def run_main(main) -> None:
    """Run a worker's ``main``; on any error print it and abort the whole job (no rank hangs)."""
    import sys
    import traceback
    try:
        rc = main()
    except BaseException:
        print(f"rank {MPI.COMM_WORLD.rank}: {traceback.format_exc()}", file=sys.stderr, flush=True)
        MPI.COMM_WORLD.Abort(3)
        raise
    sys.exit(rc)
