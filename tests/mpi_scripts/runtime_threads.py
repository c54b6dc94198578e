"""Worker for tests/runtime/test_threads.py: the native core's submit queue and handles under threads.

Checks: many user threads submitting at once (first negotiated, then cached), a handle waited on
from other threads than the one that submitted it, and a shutdown that comes while work is in flight
(its waiters are woken with an error, no rank hangs, new submissions are refused).
"""
import os
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402
from tests.mpi_util import run_checks, write_results  # noqa: E402

THREADS, PER_THREAD, STEPS = 8, 40, 3


def check_threads_submit_at_once():
    """8 threads each submit 40 named allreduces at once, 3 steps (the later ones from the cache),
    and wait for them; every result is the sum over ranks."""
    n, r = C.size(), C.rank()
    wrong, start = [], threading.Barrier(THREADS)

    def worker(k):
        start.wait()
        for step in range(STEPS):
            handles = [(i, C.allreduce_async(np.full(3 + i % 5, k * 1000 + i + r, np.float64),
                                             name=f"t{k}.{i}", op=C.Sum))
                       for i in range(PER_THREAD)]
            for i, h in handles:
                got = C.synchronize(h)
                want = n * (k * 1000 + i) + n * (n - 1) / 2
                if got.shape != (3 + i % 5,) or not np.all(got == want):
                    wrong.append(f"thread {k} step {step} t{k}.{i}: {got[:2]} != {want}")

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    if any(t.is_alive() for t in ts):
        return "a submitting thread did not finish in 120 s"
    return "; ".join(wrong[:5]) or None


def check_handle_waited_from_other_threads():
    """A handle submitted here is waited on by three other threads at once (and polled): every
    waiter gets the same result; a wait with a timeout on an unfinished op raises TimeoutError."""
    n = C.size()
    h = C.allreduce_async(np.arange(4, dtype=np.float32), name="shared.wait", op=C.Sum)
    got, errors = [], []

    def waiter():
        try:
            got.append(h.wait())
        except Exception as exc:   # reported below
            errors.append(repr(exc))

    ts = [threading.Thread(target=waiter) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    if errors or len(got) != 3:
        return f"waiters: {len(got)} results, errors {errors}"
    if not all(np.array_equal(g, np.arange(4) * n) for g in got) or not h.poll():
        return f"results {got}, poll {h.poll()}"
    lonely = C.Handle("never.finished")   # nothing finishes it
    try:
        lonely.wait(timeout=0.05)
        return "wait(timeout) on an unfinished handle returned"
    except TimeoutError:
        return None


def shutdown_with_work_in_flight():
    """Rank 0 submits an op no other rank ever submits and a thread waits on it; then every rank
    shuts down. The waiter is woken with a CollectiveError, shutdown returns, and a submission
    after it is refused with a ValueError."""
    h = C.allreduce_async(np.ones(2), name="orphan") if C.rank() == 0 else None
    woken = []

    def waiter():
        try:
            h.wait()
            woken.append("returned")
        except C.CollectiveError as exc:
            woken.append(f"error: {exc}")

    t = threading.Thread(target=waiter)
    if h is not None:
        t.start()
    C.shutdown()
    if h is not None:
        t.join(30)
        if t.is_alive() or not woken or not woken[0].startswith("error"):
            return f"the waiter on the op in flight: {woken or 'still waiting'}"
    try:
        C.allreduce_async(np.ones(2), name="after.shutdown")
        return "a submission after shutdown was accepted"
    except ValueError:
        return None


def main():
    C.init()
    results = run_checks([check_threads_submit_at_once, check_handle_waited_from_other_threads])
    C.barrier()
    results.update(run_checks([shutdown_with_work_in_flight]))
    write_results(results)


if __name__ == "__main__":
    main()
