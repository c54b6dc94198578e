"""GPU streams of a Kineto run: per rank and stream, its kernels and how busy it was.

Busy is the union of the stream's work (kernels, memcpys, memsets) over the rank's GPU time (first
work's start to last work's end, all streams); the kinds are those of :mod:`viewer.kineto.kernels`.
"""
from __future__ import annotations

import pandas as pd

from viewer.kineto.kernels import gpu_work, union_ns

COLUMNS = ["rank", "stream", "kernels", "busy_ns", "busy_pct", "compute_ns", "communication_ns", "memory_ns",
           "top_kernel"]


def stream_table(tables, include_last_step: bool = False, hta_rounding: bool = True):
    """One row per rank and GPU stream (none for CPU-only traces)."""
    work = gpu_work(tables, include_last_step, hta_rounding)
    rows = []
    for rank, r in work.groupby("rank", sort=True):
        span = int(r["end_ns"].max() - r["t_ns"].min())
        for stream, g in r.groupby("thread", sort=True):
            busy = union_ns(g["t_ns"], g["end_ns"])
            kinds = {k: union_ns(x["t_ns"], x["end_ns"]) for k, x in g.groupby("kind")}
            by_name = (g["end_ns"] - g["t_ns"]).groupby(g["name"]).sum()
            top = str(by_name.idxmax()).split("(")[0][:80] if len(by_name) else None
            rows.append([int(rank), stream, len(g), busy, 100.0 * busy / span if span else float("nan"),
                         kinds.get("compute", 0), kinds.get("communication", 0), kinds.get("memory", 0), top])
    return pd.DataFrame(rows, columns=COLUMNS)
