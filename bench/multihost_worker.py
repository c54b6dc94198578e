"""MPI worker for the multihost group: float32 sum allreduce, flat ring against hierarchical, on a
`ringscope cluster`, every variant in this one job and alternated rep by rep.

The variants are switched through the engine's config (what RINGSCOPE_HIERARCHICAL_ALLREDUCE sets at
init; the backend reads it per allreduce) while nothing is in flight. Rank 0 prints
``BENCH_JSON {"ranks", "hosts", "sizes": {bytes: {variant: [s per op, per rep]}}}``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from bench import mpi_side  # noqa: E402
from bench.launch import emit  # noqa: E402

VARIANTS = {"flat": False, "hierarchical": True}   # variant -> config.hierarchical_allreduce


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", default="1,4,16")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--block-s", type=float, default=0.4)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ns = ap.parse_args()
    import collectives as C
    from collectives.engine import get_engine
    C.init()
    comm = MPI.COMM_WORLD.Dup()
    cfg = get_engine().config
    variants = ns.variants.split(",")

    def use(v):
        cfg.hierarchical_allreduce = VARIANTS[v]

    out = {}
    for mib in (float(m) for m in ns.mib.split(",")):
        x = np.ones(int(mib * (1 << 20)) // 4, dtype=np.float32)

        def op(x=x):
            C.allreduce(x, name="x", op=C.Sum)
        iters = {}
        for v in variants:
            use(v)
            iters[v] = mpi_side.calibrate(comm, op, ns.block_s, max_iters=50)
        n_iter = min(iters.values())
        times = {v: [] for v in variants}
        for rep in range(ns.reps):
            for v in (variants if rep % 2 == 0 else variants[::-1]):
                use(v)
                times[v].append(mpi_side.timed_block(comm, op, n_iter))
        out[str(x.nbytes)] = times
    if C.rank() == 0:
        emit({"ranks": C.size(), "hosts": C.size() // C.local_size(), "sizes": out})
    C.shutdown()
    return 0


if __name__ == "__main__":
    mpi_side.run_main(main)
