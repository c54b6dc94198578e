"""Where a Kineto run's GPU time went, per rank, stream and step (HTA's definitions, docs/KINETO.md), from its
GPU work (``viewer.kineto.kernels.gpu_work``; ``viewer.kineto.per_rank`` runs them a batch of ranks at a time)."""
from __future__ import annotations

import pandas as pd

from viewer.kineto.kernels import KINDS, step_spans, union_ns

TEMPORAL = ["rank", "kernel_time_ns", "idle_ns", "compute_ns", "non_compute_ns", "communication_ns",
            "memory_ns", "idle_pct", "compute_pct", "non_compute_pct"]
OVERLAP = ["rank", "communication_ns", "compute_ns", "overlap_ns", "exposed_ns", "overlap_pct"]
STREAMS = ["rank", "stream", "kernels", "busy_ns", "busy_pct", "compute_ns", "communication_ns", "memory_ns",
           "top_kernel"]
STEPS = ["rank", "step", "step_ns", "gpu_span_ns", "gpu_busy_ns", "compute_ns", "communication_ns",
         "overlapped_ns", "exposed_comm_ns", "gpu_idle_ns", "kernels", "collectives"]
NAN = float("nan")


def unions(g) -> dict:
    """ns covered by the work ``g``: per kind it holds, in all (``busy``), and by communication during compute
    (``overlap``: |comm| + |compute| − |comm ∪ compute|)."""
    t, e = g["t_ns"].to_numpy(), g["end_ns"].to_numpy()
    of = {k: (g["kind"] == k).to_numpy(dtype=bool) for k in KINDS}
    out = {k: union_ns(t[sel], e[sel]) for k, sel in of.items() if sel.any()}
    both = of["communication"] | of["compute"]
    out["overlap"] = out.get("communication", 0) + out.get("compute", 0) - union_ns(t[both], e[both])
    out["busy"] = union_ns(t, e)
    return out


def _span(g) -> int:
    return int(g["end_ns"].max() - g["t_ns"].min())


def temporal_breakdown(work):
    """One row per rank with GPU work: compute, non-compute (kernel time − compute − idle) and idle."""
    rows = []
    for rank, g in work.groupby("rank", sort=True):
        span, u = _span(g), unions(g)
        compute, idle = u.get("compute", 0), span - u["busy"]
        non_compute = span - compute - idle
        pct = [100.0 * v / span if span > 0 else NAN for v in (idle, compute, non_compute)]
        rows.append([int(rank), span, idle, compute, non_compute, u.get("communication", 0), u.get("memory", 0),
                     *pct])
    return pd.DataFrame(rows, columns=TEMPORAL)


def comm_comp_overlap(work):
    """One row per rank with GPU work (``overlap_pct`` NaN when it ran no NCCL kernel)."""
    rows = []
    for rank, g in work.groupby("rank", sort=True):
        u = unions(g)
        comm, both = u.get("communication", 0), u["overlap"]
        rows.append([int(rank), comm, u.get("compute", 0), both, comm - both, 100.0 * both / comm if comm else NAN])
    return pd.DataFrame(rows, columns=OVERLAP)


def stream_table(work):
    """One row per rank and GPU stream: its work, busy time (of the rank's kernel time) and top kernel."""
    rows = []
    for rank, r in work.groupby("rank", sort=True):
        span = _span(r)
        for stream, g in r.groupby("thread", sort=True):
            u = unions(g)
            by_name = (g["end_ns"] - g["t_ns"]).groupby(g["name"]).sum()
            top = str(by_name.idxmax()).split("(")[0][:80] if len(by_name) else None
            rows.append([int(rank), stream, len(g), u["busy"], 100.0 * u["busy"] / span if span else NAN,
                         u.get("compute", 0), u.get("communication", 0), u.get("memory", 0), top])
    return pd.DataFrame(rows, columns=STREAMS)


def step_breakdown(tables, work):
    """One row per rank and ProfilerStep; ``work``: the last step's included. GPU columns NaN without GPU work."""
    by_step = {k: g for k, g in work.groupby(["rank", "step"])}
    comms = {k: g for k, g in tables.fused_ops.groupby(["rank", "step"])}
    spans = step_spans(tables.events)[["rank", "step", "start_ns", "end_ns"]]
    rows = []
    for rank, step, start, end in spans.itertuples(index=False):
        g, c = by_step.get((rank, step)), comms.get((rank, step))
        n_coll = 0 if c is None else len(c)
        if g is None or not len(g):
            comm = NAN if c is None else union_ns(c["start_ns"], c["end_ns"])
            rows.append([rank, step, end - start, NAN, NAN, NAN, comm, NAN, NAN, NAN, 0, n_coll])
            continue
        span, u = _span(g), unions(g)
        comm = u.get("communication", 0)
        rows.append([rank, step, end - start, span, u["busy"], u.get("compute", 0), comm, u["overlap"],
                     comm - u["overlap"], span - u["busy"], len(g), n_coll])
    return pd.DataFrame(rows, columns=STEPS)
