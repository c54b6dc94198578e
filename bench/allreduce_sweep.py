"""MPI worker: allreduce time per size for every variant, interleaved rep by rep.

Run as ``mpiexec -n N python bench/allreduce_sweep.py --sizes 4096,65536 --reps 5``; rank 0 prints
one ``BENCH_JSON`` line: ``{"ranks", "variants", "sizes", "times": {variant: {size: [s per rep]}},
"iters": ..., "errors": {variant: message}}``.

Variants (float32, sum):
- ``raw_mpi``: mpi4py ``comm.Allreduce(IN_PLACE, ...)``, blocking, as a user would call it;
- ``ring_alone``: ``collectives.backends.ring.RingBackend.allreduce`` on a numpy buffer, no engine;
- ``e2e_ring`` / ``e2e_mpi``: ``collectives.allreduce`` (submit, negotiation, fusion, backend, result)
  with the ring / mpi backend (the mpi one through ``Entry(backend="mpi")``, the engine's
  per-op backend choice, so both run in this one job);
- ``gloo``: ``torch.distributed.all_reduce`` on a gloo process group (blocking).
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from bench import mpi_side  # noqa: E402
from bench.launch import emit  # noqa: E402

ALL = ("raw_mpi", "ring_alone", "e2e_ring", "e2e_mpi", "gloo")


def make_raw_mpi(comm):
    def factory(buf):
        return lambda: comm.Allreduce(MPI.IN_PLACE, buf, MPI.SUM)
    return factory


def make_ring_alone(comm):
    from collectives.backends.ring import RingBackend
    from collectives.ops import Sum
    from collectives.process_sets import CommInfo
    info = CommInfo(0, range(comm.size), comm.rank, comm.Dup())
    ring = RingBackend(None)

    def factory(buf):
        return lambda: ring.allreduce(buf, Sum, info)
    return factory


def make_e2e(backend):
    import collectives
    from collectives.adapters import NUMPY
    from collectives.engine import get_engine
    from collectives.entry import Entry
    from tracer import vocab as V
    collectives.init()

    def factory(buf):
        name = f"bench.{backend}.{buf.nbytes}"
        if backend == "ring":
            return lambda: collectives.allreduce(buf, name=name, op=collectives.Sum)
        eng = get_engine()
        return lambda: eng.enqueue(Entry(name, V.ALLREDUCE, buf, NUMPY,
                                         reduce_op=collectives.Sum, backend=backend)).wait()
    return factory


def make_gloo(comm):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    port = None
    if comm.rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = mpi_side.bcast_obj(comm, port)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=comm.rank,
                            world_size=comm.size)

    def factory(buf):
        t = torch.from_numpy(buf)
        return lambda: dist.all_reduce(t)
    return factory


def setup(name, comm):
    if name == "raw_mpi":
        return make_raw_mpi(comm)
    if name == "ring_alone":
        return make_ring_alone(comm)
    if name == "e2e_ring":
        return make_e2e("ring")
    if name == "e2e_mpi":
        return make_e2e("mpi")
    if name == "gloo":
        return make_gloo(comm)
    raise ValueError(f"unknown variant {name!r}; use {', '.join(ALL)}")


def cycle_check(comm, factories, size, reps, block_s) -> dict:
    """e2e ring latency at ``size`` with the engine's cycle time at its setting and at 10x it
    (``config.cycle_time_ms``, read by the coordinator each cycle), interleaved: an engine that
    wakes on work shows the same latency for both."""
    from collectives.engine import get_engine
    cfg = get_engine().config
    base = cfg.cycle_time_ms
    fn = factories["e2e_ring"](np.zeros(size // 4, dtype=np.float32))
    out = {"size": size, "cycle_ms": base, "base": [], "x10": []}
    iters = mpi_side.calibrate(comm, fn, block_s)
    for rep in range(reps):
        for kind in (("base", "x10") if rep % 2 == 0 else ("x10", "base")):
            mpi_side.barrier(comm)
            cfg.cycle_time_ms = base * (10 if kind == "x10" else 1)
            out[kind].append(mpi_side.timed_block(comm, fn, iters))
    cfg.cycle_time_ms = base
    return out


def agree(comm, ok: bool) -> bool:
    """True only when every rank is ok (so all ranks keep the same variant list)."""
    return mpi_side.reduce_max(comm, [0.0 if ok else 1.0])[0] == 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", required=True, help="bytes, comma separated")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--variants", default=",".join(ALL))
    ap.add_argument("--block-s", type=float, default=0.1, help="target seconds per timed block")
    ns = ap.parse_args()
    os.environ.setdefault("RINGSCOPE_BACKEND", "ring")
    comm = MPI.COMM_WORLD.Dup()
    sizes = [int(s) for s in ns.sizes.split(",")]
    factories, errors = {}, {}
    for name in ns.variants.split(","):
        try:
            f, err = setup(name, comm), None
        except Exception as exc:  # a missing part is reported, the rest still measured
            f, err = None, f"{type(exc).__name__}: {exc}"
        if agree(comm, err is None):
            factories[name] = f
        else:
            errors[name] = err or "failed on another rank"
    names = list(factories)
    times = {v: {} for v in names}
    iters = {v: {} for v in names}
    for size in sizes:
        buf = {v: np.zeros(size // 4, dtype=np.float32) for v in names}
        fns = {}
        for v in names:
            try:
                fns[v] = factories[v](buf[v])
                iters[v][size] = mpi_side.calibrate(comm, fns[v], ns.block_s)
                times[v][size] = []
            except Exception:   # a rank failing mid-sweep: stop the whole job, never hang the rest
                print(f"rank {comm.rank}: {v} at {size} B failed:\n{traceback.format_exc()}",
                      file=sys.stderr, flush=True)
                comm.Abort(3)
        for rep in range(ns.reps):
            order = names[rep % len(names):] + names[:rep % len(names)]
            for v in order:
                times[v][size].append(mpi_side.timed_block(comm, fns[v], iters[v][size]))
        del buf, fns
    cycle = cycle_check(comm, factories, min(sizes), ns.reps, ns.block_s) \
        if "e2e_ring" in factories else None
    if "gloo" in factories:
        import torch.distributed as dist
        dist.destroy_process_group()
    if any(v.startswith("e2e") for v in factories):
        import collectives
        collectives.shutdown()
    if comm.rank == 0:
        emit({"ranks": comm.size, "variants": names, "sizes": sizes, "times": times,
              "iters": iters, "errors": errors, "cycle_check": cycle, "backend_env": os.environ["RINGSCOPE_BACKEND"]})
    return 0


if __name__ == "__main__":
    mpi_side.run_main(main)
