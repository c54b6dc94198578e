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
    fw = (ev["thread"] == "framework") & (ev["ph"] == "X") & ev["name"].isin([V.STEP, V.SYNCHRONIZE])
    fw = ev.loc[fw.to_numpy(dtype=bool, na_value=False), ["rank", "name", "t_ns", "dur_ns", "step"]]
    steps_x = fw[fw["name"] == V.STEP].sort_values("t_ns")
    syncs = fw[fw["name"] == V.SYNCHRONIZE]
    del fw
    # SYNCHRONIZE without a step number: the step whose STEP span holds it
    sy_rank = syncs["rank"].to_numpy()
    sy_step = syncs["step"].to_numpy().copy()
    for rank in np.unique(sy_rank):
        m = (sy_rank == rank) & (sy_step < 0)
        if m.any():
            sy_step[m] = _step_of(syncs["t_ns"].to_numpy()[m], steps_x[steps_x["rank"] == rank])
    ops = tables.tensor_ops
    if not len(ops):
        return pd.DataFrame(columns=COLUMNS)
    sub = ops["submit_ns"]
    neg = ops["negotiated_ns"].fillna(ops["done_ns"]).fillna(sub).astype("int64").to_numpy()
    start = ops["start_ns"].fillna(pd.Series(neg, index=ops.index)).astype("int64").to_numpy()
    done = ops["done_ns"].fillna(pd.Series(start, index=ops.index)).astype("int64").to_numpy()
    sub = sub.to_numpy(dtype="int64")
    keys, gid = _keys(ops["rank"].to_numpy(), ops["step"].to_numpy())
    n = len(keys)

    def of(rank, step):  # group id of other rows' (rank, step), -1 when no op has it
        k = _combine(keys, np.asarray(rank), np.asarray(step))
        pos = np.minimum(np.searchsorted(keys["k"], k), n - 1)
        return np.where(keys["k"][pos] == k, pos, -1)

    def per_key(g, values):
        out = np.zeros(n, dtype="int64")
        ok = g >= 0
        np.add.at(out, g[ok], np.asarray(values, dtype="int64")[ok])
        return out

    sy_g = of(sy_rank, sy_step)
    sy_ok = sy_g >= 0
    sy_s = syncs["t_ns"].to_numpy()[sy_ok]
    sy_e = sy_s + syncs["dur_ns"].to_numpy()[sy_ok]
    sy_g = sy_g[sy_ok]
    wait = intervals.union_lengths(sy_g, sy_s, sy_e, n)
    flight = intervals.union_lengths(gid, sub, done, n)
    both = intervals.union_lengths(np.concatenate([gid, sy_g]), np.concatenate([sub, sy_s]),
                                   np.concatenate([done, sy_e]), n)
    exposed = flight + wait - both   # |A ∩ B| = |A| + |B| - |A ∪ B|
    st_g = of(steps_x["rank"].to_numpy(), steps_x["step"].to_numpy())
    has_step = np.zeros(n, dtype=bool)
    has_step[st_g[st_g >= 0]] = True
    span = np.full(n, np.iinfo("int64").min, dtype="int64")
    np.maximum.at(span, gid, done)
    first = np.full(n, np.iinfo("int64").max, dtype="int64")
    np.minimum.at(first, gid, sub)
    step_ns = np.where(has_step, per_key(st_g, steps_x["dur_ns"].to_numpy()), span - first)
    fo = tables.fused_ops
    fo_g = of(fo["rank"].to_numpy(), fo["step"].to_numpy())
    out = pd.DataFrame({
        "rank": keys["rank"].astype("int64"), "step": keys["step"], "step_ns": step_ns, "framework_wait_ns": wait,
        "negotiation_ns": intervals.union_lengths(gid, sub, neg, n),
        "queue_ns": intervals.union_lengths(gid, neg, start, n),
        "memcpy_ns": per_key(fo_g, (fo["memcpy_in_ns"] + fo["memcpy_out_ns"]).to_numpy()),
        "comm_ns": per_key(fo_g, fo["comm_ns"].to_numpy()), "in_flight_ns": flight, "exposed_ns": exposed,
        "overlapped_ns": flight - exposed})
    pos = out["step_ns"] > 0
    out["exposed_pct"] = np.where(pos, 100.0 * out["exposed_ns"] / out["step_ns"].where(pos, 1), 0.0)
    return out[COLUMNS]


def _keys(rank, step):
    """The sorted distinct (rank, step) pairs (a structured array with a combined sort key ``k``) and
    each row's index into them."""
    import numpy as np

    rank, step = np.asarray(rank, dtype="int64"), np.asarray(step, dtype="int64")
    lo, hi = int(step.min()), int(step.max())
    span = hi - lo + 2
    k = rank * span + (step - lo)
    uk, gid = np.unique(k, return_inverse=True)
    keys = np.zeros(len(uk), dtype=[("k", "int64"), ("rank", "int64"), ("step", "int64"), ("lo", "int64"),
                                    ("span", "int64")])
    keys["k"], keys["rank"], keys["step"] = uk, uk // span, uk % span + lo
    keys["lo"], keys["span"] = lo, span
    return keys, gid.reshape(-1)


def _combine(keys, rank, step):
    """Combined sort keys of (rank, step) pairs, in the space of ``keys`` (-1 where out of its range)."""
    import numpy as np

    if not len(keys):
        return np.full(len(rank), -1, dtype="int64")
    lo, span = int(keys["lo"][0]), int(keys["span"][0])
    rank, step = np.asarray(rank, dtype="int64"), np.asarray(step, dtype="int64")
    ok = (step >= lo) & (step - lo < span - 1)
    return np.where(ok, rank * span + (step - lo), -1)


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
