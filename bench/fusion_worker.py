"""MPI worker: 256 async allreduces of 16 KiB then synchronize, fusion on vs off, vs one 4 MiB op.

All three variants run in this one job, interleaved rep by rep. Fusion is switched between the
variants by setting the engine's ``config.fusion_threshold`` (what ``RINGSCOPE_FUSION_THRESHOLD``
sets at init; the coordinator reads it each cycle) while nothing is in flight.
Rank 0 prints ``BENCH_JSON {"ranks", "times": {variant: [s per rep]}, "threshold_on", ...}``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from bench import mpi_side  # noqa: E402
from bench.launch import emit  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=256)
    ap.add_argument("--bytes", type=int, default=16 * 1024)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--block-s", type=float, default=0.2)
    ns = ap.parse_args()
    import collectives
    from collectives.engine import get_engine
    collectives.init()
    comm = MPI.COMM_WORLD.Dup()
    cfg = get_engine().config
    on = cfg.fusion_threshold or 64 * 1024 * 1024
    small = [np.zeros(ns.bytes // 4, dtype=np.float32) for _ in range(ns.count)]
    big = np.zeros(ns.count * ns.bytes // 4, dtype=np.float32)

    submit_s = []

    def batch():
        t0 = time.perf_counter()
        hs = [collectives.allreduce_async(a, name=f"fusion.{i}", op=collectives.Sum)
              for i, a in enumerate(small)]
        submit_s.append(time.perf_counter() - t0)
        for h in hs:
            collectives.synchronize(h)

    def single():
        collectives.allreduce(big, name="fusion.single", op=collectives.Sum)

    variants = {"fused": (on, batch), "unfused": (0, batch), "single": (on, single)}
    iters, times = {}, {v: [] for v in variants}
    for v, (thr, fn) in variants.items():
        cfg.fusion_threshold = thr
        iters[v] = mpi_side.calibrate(comm, fn, ns.block_s, max_iters=200)
    names = list(variants)
    submit_s.clear()
    for rep in range(ns.reps):
        for v in names[rep % 3:] + names[:rep % 3]:
            thr, fn = variants[v]
            mpi_side.barrier(comm)
            cfg.fusion_threshold = thr
            times[v].append(mpi_side.timed_block(comm, fn, iters[v]))
    cfg.fusion_threshold = on
    collectives.shutdown()
    if comm.rank == 0:
        emit({"ranks": comm.size, "times": times, "iters": iters, "threshold_on": on,
              "count": ns.count, "bytes": ns.bytes, "backend": cfg.backend,
              "cycle_time_ms": cfg.cycle_time_ms,
              "submit_median_s": float(np.median(submit_s))})
    return 0


if __name__ == "__main__":
    mpi_side.run_main(main)
