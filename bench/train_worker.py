"""MPI worker: demo training steps per second with the timeline off and on, interleaved.

The demo's training step (:mod:`bench.demo_step`). Unlike the demo script, timing runs in blocks
inside one job so the variants interleave. Blocks of the same number of steps alternate timeline
off / on (``hvd.start_timeline(DIR/)`` before an "on" block, ``hvd.stop_timeline()`` inside it, so writing
out everything recorded counts against the timeline). Rank 0 prints
``BENCH_JSON {"ranks", "steps", "off": [s per block], "on": [...], "trace_bytes", ...}``.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mpi4py import MPI  # noqa: E402

from bench import mpi_side  # noqa: E402
from bench.launch import emit  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mixed")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--block-s", type=float, default=1.0)
    ap.add_argument("--out", default=None, help="keep the timelines here (default: a temp dir)")
    ap.add_argument("--control", action="store_true",
                    help="never start the timeline: both variants are 'off' (the noise floor)")
    ns = ap.parse_args()
    import collectives.torch as hvd
    from bench.demo_step import make_step
    hvd.init()
    comm = MPI.COMM_WORLD.Dup()
    step = make_step(ns.model, ns.batch)

    for _ in range(3):
        step()
    per = mpi_side.timed_block(comm, step, 3)
    steps = max(3, int(ns.block_s / per))
    root = None
    if comm.rank == 0:
        root = Path(ns.out) if ns.out else Path(tempfile.mkdtemp(prefix="ringscope-bench-tl-"))
        root.mkdir(parents=True, exist_ok=True)
    root = Path(mpi_side.bcast_obj(comm, str(root)))
    off, on, state = [], [], {"n": 0}

    def run_off():
        for _ in range(steps):
            step()

    def run_on():
        for _ in range(steps):
            step()
        hvd.stop_timeline()

    for p in range(ns.pairs):
        order = ("off", "on") if p % 2 == 0 else ("on", "off")
        for kind in order:
            if kind == "on":
                state["n"] += 1
                if ns.control:
                    on.append(mpi_side.timed_block(comm, run_off, 1))
                    continue
                hvd.start_timeline(str(root / f"block{state['n']}") + "/")
                on.append(mpi_side.timed_block(comm, run_on, 1))
            else:
                off.append(mpi_side.timed_block(comm, run_off, 1))
    mpi_side.barrier(comm)
    trace_bytes = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    hvd.shutdown()
    if not ns.out:
        mpi_side.barrier(comm)
        if comm.rank == 0:
            shutil.rmtree(root, ignore_errors=True)
    if comm.rank == 0:
        emit({"ranks": comm.size, "model": ns.model, "batch": ns.batch, "steps": steps,
              "off": off, "on": on, "trace_bytes": trace_bytes, "trace_dir": str(root),
              "blocks_on": state["n"], "control": ns.control})
    return 0


if __name__ == "__main__":
    mpi_side.run_main(main)
