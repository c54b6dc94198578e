"""Per-step breakdown of a Kineto run from its ``ProfilerStep#N`` spans.

Per rank and step: the step's CPU duration; the GPU work it launched (every kernel, memcpy and memset
whose CPU launch call ran inside the step): its span on the GPU, busy time (union), compute and
communication (unions of compute and NCCL kernels), the communication overlapped by compute and the
exposed rest, and GPU idle (span − busy). Without GPU work (CPU-only profiles), communication is the
union of the step's collectives (e.g. gloo's annotations) and the GPU columns are NaN.
"""
from __future__ import annotations

import pandas as pd

from viewer.kineto.kernels import gpu_work, overlap_ns, step_spans, union_ns

COLUMNS = ["rank", "step", "step_ns", "gpu_span_ns", "gpu_busy_ns", "compute_ns", "communication_ns",
           "overlapped_ns", "exposed_comm_ns", "gpu_idle_ns", "kernels", "collectives"]


def step_breakdown(tables, hta_rounding: bool = True):
    """One row per rank and ProfilerStep (the last step included: it may be cut by the profiler)."""
    steps = step_spans(tables.events)
    work = gpu_work(tables, include_last_step=True, hta_rounding=hta_rounding)
    by_step = {k: g for k, g in work.groupby(["rank", "step"])}
    fo = tables.fused_ops
    comms = {k: g for k, g in fo.groupby(["rank", "step"])}
    nan = float("nan")
    rows = []
    for rank, step, start, end in steps[["rank", "step", "start_ns", "end_ns"]].itertuples(index=False):
        g = by_step.get((rank, step))
        c = comms.get((rank, step))
        n_coll = 0 if c is None else len(c)
        if g is None or not len(g):
            comm = nan if c is None else union_ns(c["start_ns"], c["end_ns"])
            rows.append([rank, step, end - start, nan, nan, nan, comm, nan, nan, nan, 0, n_coll])
            continue
        comm_k = g[g["kind"] == "communication"]
        comp_k = g[g["kind"] == "compute"]
        span = int(g["end_ns"].max() - g["t_ns"].min())
        busy = union_ns(g["t_ns"], g["end_ns"])
        comm = union_ns(comm_k["t_ns"], comm_k["end_ns"])
        both = overlap_ns(comm_k["t_ns"], comm_k["end_ns"], comp_k["t_ns"], comp_k["end_ns"])
        rows.append([rank, step, end - start, span, busy, union_ns(comp_k["t_ns"], comp_k["end_ns"]), comm,
                     both, comm - both, span - busy, len(g), n_coll])
    return pd.DataFrame(rows, columns=COLUMNS)
