"""Subprocess: the tracer engineer's ``bench/tracer_overhead.py`` measurements as one JSON line.

Calls its ``hot_path`` (ns per recorder call, best of its 5 rounds, writer idle) with NVTX off and
on, and ``writer_rate`` (events/s the writer thread serialises and writes), ``--runs`` times each,
and reports the median over runs.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import tracer_overhead as to  # noqa: E402
from bench.launch import emit  # noqa: E402

EVENTS_PER_CALL = {"begin+end (one X event)": 1}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--writer-events", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ns = ap.parse_args()
    out = {"hot_path_ns_per_event": {}, "dropped": 0}
    with tempfile.TemporaryDirectory(prefix="ringscope-bench-") as d:
        for nvtx in (False, True):
            runs = []
            for _ in range(ns.runs):
                res, dropped = to.hot_path(d, ns.events, nvtx)
                out["dropped"] += int(dropped or 0)
                runs.append({k: v / EVENTS_PER_CALL.get(k, 1) for k, v in res.items()})
            out["hot_path_ns_per_event"]["nvtx_on" if nvtx else "nvtx_off"] = {
                k: statistics.median(r[k] for r in runs) for k in runs[0]}
        rates, sizes = [], []
        for _ in range(ns.runs):
            rate, per = to.writer_rate(d, ns.writer_events)
            rates.append(rate)
            sizes.append(per)
        out["writer_events_per_s"] = statistics.median(rates)
        out["writer_bytes_per_event"] = statistics.median(sizes)
    emit(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
