"""MPI worker: where recording's CPU goes inside a training step, call by call (no target).

The paired per-step measure (``recording_worker.py``) tells the total to ±0.4 % at best, too coarse
to weigh one change of 0.1-0.3 %. This probe wraps the runtime's trace calls and the recorder's hot
methods with the calling thread's CPU clock (``time.thread_time_ns``), trains the demo model with
the timeline always on, and prints per rank how often each call ran per step and its CPU per step,
with the wrapper's own cost (measured on an empty function) taken off. The calls run where they do
in training, on caches the step has swept, which a loop benchmark cannot show (a lifecycle costs
0.26 µs per op in a loop and ~1.2 µs here). Outer calls include the inner ones they make (an
``activity`` is the making of a backend span; its entry and exit run in C, unwrapped, as do the
executor's note calls, ``open``/``mark``; since session 15 a response's own lines are written in
``engine_trace.ends``, with its ops' lifecycles).
``--writer`` wraps the writer thread's parts too (its flush, the chunk's formatting, the write,
the begins of ops in flight): per step, though they run about once a second. ``bench/cold_calls.py``
times the same calls one at a time on swept caches, in one process. Neither times the user's
thread: a change that moves work there must be judged by ``recording_worker.py``'s CPU per step
(bench/README.md, session 13).

    mpiexec -n 2 .venv/bin/python bench/recording_probe.py --steps 300
"""
from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mpi4py import MPI  # noqa: E402

from bench import mpi_side  # noqa: E402

_clock = time.thread_time_ns


def _wrap(owner, name: str, label: str, spent: dict) -> None:
    f = getattr(owner, name)

    @functools.wraps(f)
    def timed(*a, **k):
        t0 = _clock()
        try:
            return f(*a, **k)
        finally:
            spent.setdefault(label, []).append(_clock() - t0)
    setattr(owner, name, timed)


def _instrument(spent: dict, outer: bool, writer: bool) -> None:
    from collectives import engine_trace
    from collectives.backends import base
    from tracer import op_lines, timeline, tracefile
    from tracer import writer as w
    if writer:
        _wrap(w.TimelineWriter, "_drain", "writer.flush", spent)
        _wrap(op_lines, "chunk", "writer.chunk", spent)
        _wrap(tracefile.TraceFile, "write_chunk", "writer.write", spent)
        _wrap(timeline.TimelineRecorder, "inflight_begins", "writer.inflight_begins", spent)
    for n in ("begins", "responses", "ends"):
        _wrap(engine_trace, n, "engine_trace." + n, spent)
    _wrap(engine_trace.ReadyTicks, "record", "engine_trace.ready", spent)
    for n in ("complete", "counter", "counters", "mark_step"):
        _wrap(timeline.TimelineRecorder, n, "recorder." + n, spent)
    # a backend span: its args and its C context manager (entry and exit are C calls, unwrapped)
    from collectives.backends import mpi, ring
    for mod in (base, mpi, ring):
        _wrap(mod, "activity", "activity", spent)
    if outer:   # a wrapper's own cold cost inflates the calls around it: compare outer calls alone
        return
    for n in ("begin", "end", "ops_end", "ready_requests"):
        _wrap(timeline.TimelineRecorder, n, "recorder." + n, spent)
    for n in ("ends", "ready"):   # the formatter alone (C when built), inside the calls above
        _wrap(op_lines, n, "op_lines." + n, spent)


class _Empty:
    def call(self):
        pass


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--outer", action="store_true",
                    help="wrap only the outermost calls (to compare variants of what is inside)")
    ap.add_argument("--writer", action="store_true", help="wrap the writer thread's parts too")
    ns = ap.parse_args()
    spent: dict = {}
    _instrument(spent, ns.outer, ns.writer)
    _wrap(_Empty, "call", "empty", spent)
    import collectives.torch as hvd
    from bench.demo_step import make_step
    hvd.init()
    comm = MPI.COMM_WORLD.Dup()
    step = make_step()
    for _ in range(5):
        step()
    root = mpi_side.bcast_obj(comm, tempfile.mkdtemp(prefix="ringscope-probe-") if comm.rank == 0
                              else None)
    hvd.start_timeline(root + "/")
    import tracer
    _wrap(tracer.get_recorder(), "queue_counters", "recorder.queue_counters", spent)
    for _ in range(20):
        step()
    spent.clear()
    probe = _Empty()
    for _ in range(2000):
        probe.call()
    own = statistics.median(spent.pop("empty"))
    for values in spent.values():
        values.clear()
    cpu = time.process_time()
    for _ in range(ns.steps):
        step()
    cpu = (time.process_time() - cpu) / ns.steps
    rows = sorted(((k, len(v) / ns.steps, (sum(v) - own * len(v)) / ns.steps / 1e3)
                   for k, v in spent.items()), key=lambda r: -r[2])
    hvd.stop_timeline()
    report = comm.gather((cpu, own, rows), root=0)
    mpi_side.barrier(comm)
    hvd.shutdown()
    if comm.rank == 0:
        shutil.rmtree(root, ignore_errors=True)
        for rank, (cpu, own, rows) in enumerate(report):
            print(f"rank {rank}: process CPU {cpu * 1e3:.1f} ms per step; wrapper's own cost "
                  f"{own / 1e3:.2f} µs (taken off)")
            print(f"  {'call':24s} {'calls/step':>10s} {'µs/step':>9s}")
            for label, calls, us in rows:
                print(f"  {label:24s} {calls:10.1f} {us:9.1f}")
    return 0


if __name__ == "__main__":
    mpi_side.run_main(main)
