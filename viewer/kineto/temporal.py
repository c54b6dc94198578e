"""Temporal breakdown of a Kineto run's GPU time per rank: compute, non-compute, idle (HTA's definition).

kernel time = last GPU work's end − first GPU work's start; idle = kernel time − the union of all GPU
work; compute = the union of compute kernels; non-compute = kernel time − compute − idle (NCCL,
memory and other kernels where no compute kernel runs). Which work counts: :mod:`viewer.kineto.kernels`.
"""
from __future__ import annotations

import pandas as pd

from viewer.kineto.kernels import gpu_work, union_ns

COLUMNS = ["rank", "kernel_time_ns", "idle_ns", "compute_ns", "non_compute_ns", "communication_ns",
           "memory_ns", "idle_pct", "compute_pct", "non_compute_pct"]


def temporal_breakdown(tables, include_last_step: bool = False, hta_rounding: bool = True):
    """One row per rank with GPU work (none for CPU-only traces)."""
    work = gpu_work(tables, include_last_step, hta_rounding)
    rows = []
    for rank, g in work.groupby("rank", sort=True):
        span = int(g["end_ns"].max() - g["t_ns"].min())
        busy = union_ns(g["t_ns"], g["end_ns"])
        parts = {k: union_ns(x["t_ns"], x["end_ns"]) for k, x in g.groupby("kind")}
        compute = parts.get("compute", 0)
        idle = span - busy
        non_compute = span - compute - idle
        pct = [100.0 * v / span if span > 0 else float("nan") for v in (idle, compute, non_compute)]
        rows.append([int(rank), span, idle, compute, non_compute, parts.get("communication", 0),
                     parts.get("memory", 0), *pct])
    return pd.DataFrame(rows, columns=COLUMNS)
