"""HolisticTraceAnalysis on one trace directory, run by HTA's own interpreter (never ringscope's
venv: HTA is no dependency). Prints ``BENCH_JSON`` with its parse time and, with ``--figures``, its
overlap, temporal breakdown and idle time per rank: the answer ``ringscope summarize`` is timed against.

    $RINGSCOPE_HTA_PYTHON bench/kineto_hta_probe.py TRACE_DIR [--figures]
"""
from __future__ import annotations

import json
import logging
import sys
import time


def main() -> None:
    logging.disable(logging.WARNING)
    import warnings

    warnings.simplefilter("ignore")
    from hta.trace_analysis import TraceAnalysis

    t0, c0 = time.perf_counter(), time.process_time()
    a = TraceAnalysis(trace_dir=sys.argv[1])
    out = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
    if "--figures" in sys.argv:
        ov = a.get_comm_comp_overlap(visualize=False)
        tb = a.get_temporal_breakdown(visualize=False)
        out["overlap_pct"] = {int(r): float(v) for r, v in zip(ov["rank"], ov["comp_comm_overlap_pctg"])}
        out["temporal_pct"] = {int(r): [float(c), float(n), float(i)] for r, c, n, i in
                               zip(tb["rank"], tb["compute_time_pctg"], tb["non_compute_time_pctg"],
                                   tb["idle_time_pctg"])}
        idle = a.get_idle_time_breakdown(visualize=False)[0]
        out["idle_us"] = {f"{int(r)}/{int(s)}/{c}": float(t) for r, s, c, t in
                          zip(idle["rank"], idle["stream"], idle["idle_category"], idle["idle_time"])}
    print("BENCH_JSON " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
