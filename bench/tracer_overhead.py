"""Tracer overhead: hot-path cost per recorded event and the writer's events per second.

Prints figures (no assertions): ``.venv/bin/python bench/tracer_overhead.py [--events N]``.
The hot path (which appends each event's record) is timed on the calling thread between two writer
wake-ups, so it is the caller's own cost; the writer is then timed draining a buffer of N events to a
real file. In training the writer's time per event (1 / its rate) is also spent, on another thread but
under the same GIL.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracer import vocab as v  # noqa: E402
from tracer.config import TimelineSettings  # noqa: E402
from tracer.nvtx_emitter import load_emitter  # noqa: E402
from tracer.timeline import open_recorder  # noqa: E402


def _recorder(d, name, nvtx, buffer_events, flush_s=0.25):
    # NVTX "on" is forced: no tool is attached here, so the tracer would otherwise skip NVTX (the
    # calls then cost what they cost under Nsight minus the tool's own work)
    s = TimelineSettings(spec=str(d), buffer_events=buffer_events, flush_interval_s=flush_s, nvtx=nvtx)
    return open_recorder({"rank": 0, "size": 1}, s, Path(d) / name, load_emitter(nvtx, force=True))


class _Op:
    """The runtime's op as the tracer reads it (tracer/recorder.py, OPS)."""

    def __init__(self, rec):
        self.trace_key = ("allreduce.fc.weight", v.ALLREDUCE, 4096, "float32", (32, 32), "Average",
                          0, 0)
        self.submit_ns, self.stamp = rec.now(), (rec, 0)


def hot_path(d, n, nvtx):
    """ns per call of each recorder call, the writer idle (its own cost is :func:`writer_rate`)."""
    rec = _recorder(d, f"hot-{nvtx}.json", nvtx, buffer_events=12 * n + 10, flush_s=1.0)
    args = {v.ARG_TENSOR: "allreduce.fc.weight", v.ARG_BYTES: 4096}
    ops = [_Op(rec)]
    out = {}
    cases = {
        "instant": lambda: rec.instant(v.TID_FRAMEWORK, v.STALL, v.CAT_FRAMEWORK, args),
        "begin+end (one X event)": lambda: rec.end(
            rec.begin(v.TID_BACKEND, v.RING_ALLREDUCE, v.CAT_COMM, args)),
        "with span (one X event)": lambda: _span(rec, args),
        "complete": lambda: rec.complete(v.TID_FUSION, v.FUSED_RESPONSE, v.CAT_FUSION, 1, 2, args),
        "counter": lambda: rec.counter(v.COUNTER_QUEUE_DEPTH, 3),
        "ready (coordinator's READY)": lambda: rec.ready(["allreduce.fc.weight"], 3, 0, 1),
        "ops_done (one op)": lambda: rec.ops_done(ops, 2),
    }
    rounds = 5   # best of 5: the machine is shared, the minimum is the tracer's own cost
    for label, fn in cases.items():
        best = None
        for _ in range(rounds):
            t0 = time.perf_counter_ns()
            for _ in range(n // rounds):
                fn()
            dt = (time.perf_counter_ns() - t0) / (n // rounds)
            best = dt if best is None else min(best, dt)
        out[label] = best
    rec.close()
    return out, rec.events_dropped()


def _span(rec, args):
    with rec.span(v.TID_BACKEND, v.RING_ALLREDUCE, v.CAT_COMM, args):
        pass


def writer_rate(d, n):
    """Events per second the writer thread formats and writes, for the runtime's mix: per tensor
    its op's X line and a synchronize span."""
    rec = _recorder(d, "writer.json", False, buffer_events=n + 10, flush_s=1.0)
    ops, args = [_Op(rec)], {v.ARG_TENSOR: "allreduce.fc.weight", v.ARG_STEP: 0}
    events = 0
    while events < n:
        rec.ops_done(ops, rec.now())
        _span(rec, args)
        events += 2
    t0 = time.perf_counter()
    rec.flush(timeout=600)
    dt = time.perf_counter() - t0
    size = rec.path.stat().st_size
    rec.close()
    return events / dt, size / events


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ringscope-bench-") as d:
        for nvtx in (False, True):
            res, dropped = hot_path(d, min(a.events, 20_000), nvtx)
            print(f"hot path, NVTX {'on ' if nvtx else 'off'} (ns per call; dropped {dropped}):")
            for label, ns in res.items():
                print(f"  {label:40s} {ns:8.0f} ns")
        rate, per = writer_rate(d, a.events)
        print(f"writer: {rate:,.0f} events/s ({per:.0f} bytes/event on disk)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
