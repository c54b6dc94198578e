"""What the runtime's trace calls cost on caches a training step has swept (no target, no MPI).

In the 4-rank demo a rank's engine wakes a few times a step, after milliseconds of the model's own
work, and each trace call then runs on cold caches: the probe (``recording_probe.py``) measures
~6 µs for a counter call there, against 0.3 µs in a loop. This reproduces that condition in one
process: before each timed call it writes through a buffer larger than the last-level cache, then
times the one call with ``perf_counter_ns``; the median of many such calls is printed, with the
same call timed warm (back to back) beside it. A change to a call's footprint (the code and the
objects it reaches) shows here in seconds, where the paired end-to-end measure needs an hour; but
a lead, not a verdict: work moved to another call or thread is not timed here (bench/README.md,
session 13).

    .venv/bin/python bench/cold_calls.py [--reps 300]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import tracer  # noqa: E402
from tracer import vocab as V  # noqa: E402
from tracer.config import TimelineSettings  # noqa: E402
from tracer.timeline import TimelineRecorder  # noqa: E402

SWEEP_BYTES = 48 << 20   # more than this machine's last-level cache


def _timed(fn, reps: int, sweep) -> float:
    """Median µs of one call of ``fn``, after ``sweep()`` when given. A ``fn`` with a ``setup``
    attribute is called with what ``setup()`` returns, made before the sweep."""
    ts = []
    setup = getattr(fn, "setup", None)
    for _ in range(reps):
        arg = setup() if setup is not None else None
        if sweep is not None:
            sweep()
        t0 = time.perf_counter_ns()
        fn(arg) if setup is not None else fn()
        ts.append(time.perf_counter_ns() - t0)
    return statistics.median(ts) / 1e3


def _ops(rec, n):
    """``n`` finished ops of a response, as the engine hands them to the recorder."""
    from collectives.entry import Entry
    from collectives.ops import ReduceOp
    stamp = (rec, 5)
    done = []
    for i in range(n):
        e = Entry(f"allreduce.blocks.{i}.fc.weight", V.ALLREDUCE, None, None)
        e.reduce_op, e.dtype = ReduceOp.Average, "float32"
        e.shape = (320, 320 * (i % 7 + 1))
        e.nbytes = 4 * e.shape[0] * e.shape[1]
        e.submit_ns, e.stamp = rec.now(), stamp
        done.append((e, None, None))
    return done


def cases(rec):
    """label -> the call, as the runtime makes it."""
    from collectives.backends.base import activity

    class Comm:
        response, size, set_id = 5, 4, 0

    def span():
        with activity(Comm, V.RING_ALLREDUCE, 4096, "ring"):
            pass

    out = {"nothing (the timing's own cost)": lambda: None,
           "rec.now()": rec.now,
           "queue_counters (changed values)": lambda: rec.queue_counters(rec.now() & 255, 7),
           "backend span (activity)": span,
           "mark_step": rec.mark_step}
    for n in (1, 27, 128):
        done = _ops(rec, n)
        out[f"completions of {n} ops"] = lambda done=done: rec.finish_ops(done, rec.now())
    for n in (27, 128):   # new op objects each time, as each step submits (keys equal, not same)
        def fresh(done):
            rec.finish_ops(done, rec.now())
        fresh.setup = lambda n=n: _ops(rec, n)
        out[f"completions of {n} new ops"] = fresh
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=300)
    ns = ap.parse_args()
    d = tempfile.mkdtemp(prefix="ringscope-cold-")
    settings = TimelineSettings(spec=d, buffer_events=10 ** 7, flush_interval_s=1.0, nvtx=False)
    rec = TimelineRecorder({"rank": 1, "size": 4}, settings, Path(d) / "rank.json", None)
    tracer.set_recorder(rec)
    big = np.zeros(SWEEP_BYTES // 8)

    def sweep():
        big[::8] += 1.0   # one write per cache line

    print(f"{'call':34s} {'cold µs':>8s} {'warm µs':>8s}")
    for label, fn in cases(rec).items():
        print(f"{label:34s} {_timed(fn, ns.reps, sweep):8.2f} {_timed(fn, ns.reps, None):8.2f}")
    tracer.set_recorder(tracer.NullRecorder())
    rec.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
