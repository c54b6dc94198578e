"""MPI worker: what recording costs per training step, with recording switched on every other step.

Block pairs (``train_worker.py``) measure the whole timeline, start and stop included, but this VM's
speed drifts by tens of percent over seconds, so a 1 % effect hides in their noise. Here the
timeline is started once and the recorder's own switch (``rec.enabled``, what every hot-path call
checks) flips so that one step of each pair is recorded (:func:`recorded`): neighbouring steps see
the same machine, and the paired difference is the cost of recording a step (everything but opening
and closing the file). The writer's work is placed in recorded steps too, so the difference holds
its cost as well: the worker wakes it at the start of the recorded step of one pair in K (K pairs
last about one flush period, 0.5 s). By default the ranks' flushes are staggered evenly across the
K pairs, as the writers' independent timers put them (``--writer timers``); ``--writer steps``
puts every rank's flush on the same pair (measured: no difference at 2 ranks, bench/README.md);
``--writer anywhere`` leaves the writer on its own timer (its work then lands in both kinds of step
alike). Its CPU time over the run (from /proc) is reported apart. The collector's existing objects
are frozen after warm-up (``gc.freeze``): it still runs, so collections the recording causes still
count, but full collections of the model's own objects no longer land at random in one kind of step.
An unrecorded step is as one without a timeline: until session 8 the runtime's completions still
looked for stamped ops in it, a cost of every step of a job with a timeline open that the paired
difference then left out (bench/README.md, session 8). ``--control`` never switches recording on
(the noise floor). Rank 0 prints ``BENCH_JSON`` with
per-step wall times of both kinds and each rank's CPU time per step of both kinds.
"""
from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mpi4py import MPI  # noqa: E402

from bench import mpi_side  # noqa: E402
from bench.launch import emit  # noqa: E402
from tracer.config import TimelineSettings  # noqa: E402

WRITER = "ringscope-timeline-writer"
FLUSH_PERIOD_S = TimelineSettings.flush_interval_s   # the writer's default period


def thread_cpu_s(name: str) -> float:
    """CPU seconds used so far by this process's thread called ``name`` (0 when there is none)."""
    import threading
    ids = [t.native_id for t in threading.enumerate() if t.name == name]
    if not ids:
        return 0.0
    with open(f"/proc/self/task/{ids[0]}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def recorded(i: int) -> bool:
    """Whether step ``i`` is recorded: one of each pair of steps, first in even pairs and second in
    odd ones (on off, off on, ...). Plain alternation put every recorded step at an even index, and
    the job's own even/odd steps differ: the control (never recording) then gave 0.995-1.010."""
    pair, second = divmod(i, 2)
    return bool(second) == bool(pair % 2)


def paired(values):
    """(values of the recorded steps, values of the others), pair by pair."""
    on, off = [], []
    for i in range(len(values) // 2 * 2):
        (on if recorded(i) else off).append(values[i])
    return on, off


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000, help="steps measured (half of them on)")
    ap.add_argument("--control", action="store_true", help="recording never on (noise floor)")
    ap.add_argument("--writer", choices=("timers", "steps", "anywhere"), default="timers",
                    help="when the writer flushes: staggered across ranks (as independent timers), "
                         "on the same steps on every rank, or on its own timer")
    ns = ap.parse_args()
    placed = ns.writer != "anywhere" and not ns.control
    if placed:
        os.environ["RINGSCOPE_TIMELINE_FLUSH_S"] = "1"   # the worker wakes it sooner than that
    import collectives.torch as hvd
    import tracer
    from bench.demo_step import make_step
    from collectives import _core
    hvd.init()
    comm = MPI.COMM_WORLD.Dup()
    step = make_step()
    t = time.perf_counter()
    for _ in range(5):
        step()
    pair_s = comm.bcast(2 * (time.perf_counter() - t) / 5, root=0)
    every = max(1, round(FLUSH_PERIOD_S / pair_s))   # pairs per flush, the same on every rank
    offset = comm.rank * every // comm.size if ns.writer == "timers" else 0
    root = tempfile.mkdtemp(prefix="ringscope-bench-rec-") if comm.rank == 0 else None
    root = mpi_side.bcast_obj(comm, root)
    hvd.start_timeline(root + "/")
    rec = tracer.get_recorder()
    wall, cpu = [], []
    gc.collect()
    gc.freeze()
    mpi_side.barrier(comm)
    writer0 = thread_cpu_s(WRITER)
    t, c = time.perf_counter(), time.process_time()
    for i in range(ns.steps):
        rec.enabled = recorded(i) and not ns.control
        # an unrecorded step runs as without a timeline: no op of it is stamped, and none of the
        # step before is in flight (the step waits for its ops), so the runtime's completions need
        # not look at the tracer at all, as in a job that never started one
        if not rec.enabled:
            _core.unstamp()   # (the bench knows no op in flight is stamped)
        if placed and rec.enabled and (i // 2 + offset) % every == 0:
            rec.writer.wake()
        step()
        t2, c2 = time.perf_counter(), time.process_time()
        wall.append(t2 - t)
        cpu.append(c2 - c)
        t, c = t2, c2
    rec.enabled = True
    wall, cpu = paired(wall), paired(cpu)
    writer = comm.gather((thread_cpu_s(WRITER) - writer0) / ns.steps, root=0)
    gc.unfreeze()
    cpus = comm.gather(cpu, root=0)
    hvd.stop_timeline()
    trace_bytes = sum(f.stat().st_size for f in Path(root).rglob("*") if f.is_file())
    mpi_side.barrier(comm)
    hvd.shutdown()
    if comm.rank == 0:
        shutil.rmtree(root, ignore_errors=True)
        emit({"ranks": comm.size, "steps": ns.steps, "control": ns.control, "writer": ns.writer,
              "pairs_per_flush": every,
              "on": wall[0], "off": wall[1],
              "cpu_on": [c[0] for c in cpus], "cpu_off": [c[1] for c in cpus],
              "writer_cpu_s_per_step": writer, "trace_bytes": trace_bytes})
    return 0


if __name__ == "__main__":
    mpi_side.run_main(main)
