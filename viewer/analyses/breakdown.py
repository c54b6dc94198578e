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
    import numpy as np
    import pandas as pd

    ev = tables.events
    fw = ev[(ev["thread"] == "framework") & (ev["ph"] == "X")]
    steps_x = fw[fw["name"] == V.STEP].sort_values("t_ns")
    syncs = fw[fw["name"] == V.SYNCHRONIZE]
    # SYNCHRONIZE without a step number: the step whose STEP span holds it
    sy_step = syncs["step"].to_numpy().copy()
    for rank in np.unique(syncs["rank"].to_numpy()):
        m = (syncs["rank"] == rank).to_numpy() & (sy_step < 0)
        if m.any():
            sy_step[m] = _step_of(syncs["t_ns"].to_numpy()[m], steps_x[steps_x["rank"] == rank])
    sync_iv = intervals.grouped(zip(syncs["rank"].tolist(), sy_step.tolist()), syncs["t_ns"].tolist(),
                                (syncs["t_ns"] + syncs["dur_ns"]).tolist())
    step_len = {}
    for k, d in zip(zip(steps_x["rank"].tolist(), steps_x["step"].tolist()), steps_x["dur_ns"].tolist()):
        step_len[k] = step_len.get(k, 0) + d
    ops = tables.tensor_ops
    sub = ops["submit_ns"]
    neg = ops["negotiated_ns"].fillna(ops["done_ns"]).fillna(sub).astype("int64")
    start = ops["start_ns"].fillna(neg).astype("int64")
    done = ops["done_ns"].fillna(start).astype("int64")
    keys = list(zip(ops["rank"].tolist(), ops["step"].tolist()))
    sub, neg, start, done = sub.tolist(), neg.tolist(), start.tolist(), done.tolist()
    g_neg = intervals.grouped(keys, sub, neg)
    g_queue = intervals.grouped(keys, neg, start)
    g_flight = intervals.grouped(keys, sub, done)
    fo = tables.fused_ops
    memcpy, comm = {}, {}
    for k, m, c in zip(zip(fo["rank"].tolist(), fo["step"].tolist()),
                       (fo["memcpy_in_ns"] + fo["memcpy_out_ns"]).tolist(), fo["comm_ns"].tolist()):
        memcpy[k] = memcpy.get(k, 0) + m
        comm[k] = comm.get(k, 0) + c
    rows = []
    for key in sorted(g_flight):
        flight = g_flight[key]
        sync = sync_iv.get(key, [])
        step_ns = step_len.get(key)
        if step_ns is None:
            step_ns = max(e for _, e in flight) - min(s for s, _ in flight)
        inflight = intervals.length(flight)
        exposed = intervals.intersection_length(flight, sync)
        rows.append({
            "rank": int(key[0]), "step": int(key[1]), "step_ns": int(step_ns),
            "framework_wait_ns": intervals.length(sync), "negotiation_ns": intervals.length(g_neg[key]),
            "queue_ns": intervals.length(g_queue[key]), "memcpy_ns": int(memcpy.get(key, 0)),
            "comm_ns": int(comm.get(key, 0)), "in_flight_ns": inflight, "exposed_ns": exposed,
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
