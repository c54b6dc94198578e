"""Compute–communication overlap per rank of a Kineto run (HTA's definition).

overlap = |union of NCCL kernels ∩ union of compute kernels| / |union of NCCL kernels|: the share of
communication time during which some compute kernel also ran. ``exposed_ns`` is the rest of the
communication time. Which work counts: :mod:`viewer.kineto.kernels`.
"""
from __future__ import annotations

import pandas as pd

from viewer.kineto.kernels import gpu_work, overlap_ns, union_ns

COLUMNS = ["rank", "communication_ns", "compute_ns", "overlap_ns", "exposed_ns", "overlap_pct"]


def comm_comp_overlap(tables, include_last_step: bool = False, hta_rounding: bool = True):
    """One row per rank with GPU work (``overlap_pct`` NaN when it ran no NCCL kernel)."""
    work = gpu_work(tables, include_last_step, hta_rounding)
    rows = []
    for rank, g in work.groupby("rank", sort=True):
        comm = g[g["kind"] == "communication"]
        comp = g[g["kind"] == "compute"]
        c = union_ns(comm["t_ns"], comm["end_ns"])
        both = overlap_ns(comm["t_ns"], comm["end_ns"], comp["t_ns"], comp["end_ns"])
        rows.append([int(rank), c, union_ns(comp["t_ns"], comp["end_ns"]), both, c - both,
                     100.0 * both / c if c else float("nan")])
    return pd.DataFrame(rows, columns=COLUMNS)
