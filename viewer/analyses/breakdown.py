"""Where each rank's step went: framework wait, negotiation, queue, memcpy, communication."""
from __future__ import annotations

from tracer import vocab as V
from viewer.analyses import intervals

COLUMNS = ["rank", "step", "step_ns", "framework_wait_ns", "negotiation_ns", "queue_ns", "memcpy_ns", "comm_ns",
           "in_flight_ns", "exposed_ns", "overlapped_ns", "exposed_pct"]


def _step_of(times, step_spans):
    """Step of each time from the rank's STEP spans (-1 outside them)."""
    import numpy as np

    if not len(step_spans):
        return np.full(len(times), -1, dtype="int64")
    starts = step_spans["t_ns"].to_numpy()
    idx = np.searchsorted(starts, np.asarray(times), side="right") - 1
    steps = step_spans["step"].to_numpy()
    return np.where(idx >= 0, steps[np.clip(idx, 0, None)], -1)


def step_breakdown(tables):
    """Per rank and step, time in each phase; exposed (framework blocked) vs overlapped communication.

    Args:
        tables: :class:`viewer.schema.RunTables`.
    Returns:
        DataFrame with ``COLUMNS``: ``step_ns`` (STEP span, else first submit → last done),
        ``framework_wait_ns`` (union of SYNCHRONIZE spans), ``negotiation_ns`` / ``queue_ns`` /
        ``in_flight_ns`` (unions of submit→negotiated, negotiated→start, submit→done over the step's
        tensors), ``memcpy_ns`` and ``comm_ns`` (sums over fused ops), ``exposed_ns`` (in flight while the
        framework waited), ``overlapped_ns`` (in flight while it computed), ``exposed_pct`` (of step).
    """
    import pandas as pd

    ev = tables.events
    fw = ev[(ev["thread"] == "framework") & (ev["ph"] == "X")]
    steps_x = fw[fw["name"] == V.STEP].sort_values("t_ns")
    syncs = fw[fw["name"] == V.SYNCHRONIZE]
    rows = []
    for rank, ops in tables.tensor_ops.groupby("rank"):
        st = steps_x[steps_x["rank"] == rank]
        sy = syncs[syncs["rank"] == rank]
        sy_step = sy["step"].where(sy["step"] >= 0, pd.Series(_step_of(sy["t_ns"], st), index=sy.index))
        fo = tables.fused_ops[tables.fused_ops["rank"] == rank]
        for step, o in ops.groupby("step"):
            s = sy[sy_step == step]
            sync_iv = list(zip(s["t_ns"], s["t_ns"] + s["dur_ns"]))
            sub = o["submit_ns"]
            neg = o["negotiated_ns"].fillna(o["done_ns"]).fillna(sub)
            start = o["start_ns"].fillna(neg)
            done = o["done_ns"].fillna(start)
            flight = list(zip(sub, done))
            f = fo[fo["step"] == step]
            span = st[st["step"] == step]
            step_ns = int(span["dur_ns"].sum()) if len(span) else int(done.max() - sub.min())
            inflight = intervals.length(flight)
            exposed = intervals.intersection_length(flight, sync_iv)
            rows.append({
                "rank": int(rank), "step": int(step), "step_ns": step_ns,
                "framework_wait_ns": intervals.length(sync_iv),
                "negotiation_ns": intervals.length(zip(sub, neg)),
                "queue_ns": intervals.length(zip(neg, start)),
                "memcpy_ns": int((f["memcpy_in_ns"] + f["memcpy_out_ns"]).sum()),
                "comm_ns": int(f["comm_ns"].sum()), "in_flight_ns": inflight, "exposed_ns": exposed,
                "overlapped_ns": inflight - exposed,
                "exposed_pct": 100.0 * exposed / step_ns if step_ns > 0 else 0.0,
            })
    return pd.DataFrame(rows, columns=COLUMNS)


def breakdown_by_rank(bd):
    """Mean per step of every phase, one row per rank.

    Args:
        bd: output of :func:`step_breakdown`.
    Returns:
        DataFrame with the same columns (``step`` = number of steps averaged).
    """
    import pandas as pd

    if not len(bd):
        return pd.DataFrame(columns=COLUMNS)
    g = bd.groupby("rank")
    out = g.mean(numeric_only=True).drop(columns="step").reset_index()
    out.insert(1, "step", g.size().to_numpy())
    return out[COLUMNS]
