"""Where each rank's step went: its phases, exposed communication and the communication's stages."""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracer import vocab as V
from viewer import vocab as VOCAB
from viewer.analyses import batches, intervals

# the step's time, each instant in exactly one bucket (by the phases' precedence, then other)
BUCKETS = VOCAB.BUCKETS
PHASE_BUCKETS = [p.bucket for p in VOCAB.FRAMEWORK]   # unknown (NA) on a rank that recorded no phase spans
_LAYERS = [(p.span, p.bucket) for p in sorted(VOCAB.PHASES, key=lambda p: p.precedence) if p.span]
COLUMNS = ["rank", "step", "step_ns", "framework_wait_ns", "negotiation_ns", "queue_ns", "memcpy_ns", "comm_ns",
           "in_flight_ns", "exposed_ns", "overlapped_ns", "exposed_pct", *BUCKETS, "phases_known"]
_COMM_COLUMNS = COLUMNS[:12]
BATCH_OPS = 1 << 18   # tensor ops a batch of ranks holds at once (one rank with more: alone)


def _step_of(times, step_spans):
    """Step of each time from the rank's STEP spans (-1 outside them)."""
    if not len(step_spans):
        return np.full(len(times), -1, dtype="int64")
    starts = step_spans["t_ns"].to_numpy()
    idx = np.searchsorted(starts, np.asarray(times), side="right") - 1
    steps = step_spans["step"].to_numpy()
    return np.where(idx >= 0, steps[np.clip(idx, 0, None)], -1)


def step_breakdown(tables):
    """``COLUMNS`` per (rank, step); ``exposed_ns``: in flight while the framework waited to synchronize."""
    ev = tables.events_without_ops
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
    buckets = phase_buckets(tables)
    if not len(ops):
        return _with_buckets(pd.DataFrame(columns=_COMM_COLUMNS), buckets)
    # a batch of whole ranks at a time (every figure is per rank and step): the per-op intermediates of a
    # 1,024-rank run's ~10M ops never all at once
    ops = ops[["rank", "step", "submit_ns", "negotiated_ns", "start_ns", "done_ns"]]
    fo = tables.fused_ops[["rank", "step", "memcpy_in_ns", "memcpy_out_ns", "comm_ns"]]
    sy = pd.DataFrame({"rank": sy_rank, "step": sy_step, "t_ns": syncs["t_ns"].to_numpy(),
                       "dur_ns": syncs["dur_ns"].to_numpy()})
    parts = [_comm(*(t.iloc[rows] for t, rows in zip((ops, fo, sy, steps_x), batch)))
             for batch in batches.rank_batches([t["rank"].to_numpy() for t in (ops, fo, sy, steps_x)], BATCH_OPS)]
    out = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    return _with_buckets(out, buckets)


def _comm(ops, fo, sy, steps_x):
    """The communication columns of ``COLUMNS`` per (rank, step) of ``ops`` (whole ranks' rows of each table)."""
    sub = ops["submit_ns"]
    neg = ops["negotiated_ns"].fillna(ops["done_ns"]).fillna(sub).astype("int64").to_numpy()
    start = ops["start_ns"].fillna(pd.Series(neg, index=ops.index)).astype("int64").to_numpy()
    done = ops["done_ns"].fillna(pd.Series(start, index=ops.index)).astype("int64").to_numpy()
    sub = sub.to_numpy(dtype="int64")
    keys = _pairs(ops["rank"], ops["step"]).unique().sort_values()   # the sorted distinct (rank, step)
    gid = keys.get_indexer(_pairs(ops["rank"], ops["step"]))
    n = len(keys)

    def of(rank, step):  # group id of other rows' (rank, step), -1 when no op has it
        return keys.get_indexer(_pairs(rank, step))

    def per_key(g, values):
        out = np.zeros(n, dtype="int64")
        ok = g >= 0
        np.add.at(out, g[ok], np.asarray(values, dtype="int64")[ok])
        return out

    sy_g = of(sy["rank"].to_numpy(), sy["step"].to_numpy())
    sy_ok = sy_g >= 0
    sy_s = sy["t_ns"].to_numpy()[sy_ok]
    sy_e = sy_s + sy["dur_ns"].to_numpy()[sy_ok]
    sy_g = sy_g[sy_ok]
    wait = intervals.union_lengths(sy_g, sy_s, sy_e, n)
    flight = intervals.union_lengths(gid, sub, done, n)
    both = intervals.union_lengths(np.concatenate([gid, sy_g]), np.concatenate([sub, sy_s]),
                                   np.concatenate([done, sy_e]), n)
    exposed = flight + wait - both   # |A ∩ B| = |A| + |B| - |A ∪ B|
    st_g = of(steps_x["rank"].to_numpy(), steps_x["step"].to_numpy())
    by_key = pd.DataFrame({"sub": sub, "done": done}).groupby(gid)
    span = (by_key["done"].max() - by_key["sub"].min()).to_numpy()   # first submit -> last done
    step_ns = np.where(np.isin(np.arange(n), st_g), per_key(st_g, steps_x["dur_ns"].to_numpy()), span)
    fo_g = of(fo["rank"].to_numpy(), fo["step"].to_numpy())
    out = pd.DataFrame({
        "rank": keys.get_level_values(0), "step": keys.get_level_values(1), "step_ns": step_ns,
        "framework_wait_ns": wait,
        "negotiation_ns": intervals.union_lengths(gid, sub, neg, n),
        "queue_ns": intervals.union_lengths(gid, neg, start, n),
        "memcpy_ns": per_key(fo_g, (fo["memcpy_in_ns"] + fo["memcpy_out_ns"]).to_numpy()),
        "comm_ns": per_key(fo_g, fo["comm_ns"].to_numpy()), "in_flight_ns": flight, "exposed_ns": exposed,
        "overlapped_ns": flight - exposed})
    pos = out["step_ns"] > 0
    out["exposed_pct"] = np.where(pos, 100.0 * out["exposed_ns"] / out["step_ns"].where(pos, 1), 0.0)
    return out


def _with_buckets(comm, buckets):
    """The communication columns joined with the step buckets (zeros for a step without ops)."""
    comm = comm.astype({"rank": "int64", "step": "int64"})
    out = comm.merge(buckets.drop(columns="step_ns").astype({"rank": "int64", "step": "int64"}),
                     on=["rank", "step"], how="outer", sort=True)
    extra = out["framework_wait_ns"].isna()
    if extra.any():   # steps without ops: their length is their STEP span's
        span = out[["rank", "step"]].merge(buckets[["rank", "step", "step_ns"]], how="left")["step_ns"]
        out.loc[extra, "step_ns"] = span[extra].to_numpy()
        for c in _COMM_COLUMNS[3:]:
            out[c] = out[c].fillna(0)
    out = out.astype({c: "int64" for c in _COMM_COLUMNS if c != "exposed_pct"} | {"exposed_pct": "float64"}
                     | {c: "Int64" for c in BUCKETS})
    out["phases_known"] = out["phases_known"].fillna(False).astype(bool)
    return out[COLUMNS].reset_index(drop=True)


def phase_buckets(tables):
    """Per rank and STEP span, each instant in its first covering phase (else ``other``); NA without phases."""
    ev = tables.events_without_ops
    names = [n for n, _ in _LAYERS] + [V.STEP]
    sel = ((ev["ph"] == "X") & ev["name"].isin(names)).to_numpy(dtype=bool, na_value=False)
    x = ev.loc[sel, ["rank", "name", "cat", "t_ns", "dur_ns", "step"]]
    is_phase = (x["cat"] == V.CAT_PHASE).to_numpy(dtype=bool, na_value=False)
    steps = x[(x["name"] == V.STEP).to_numpy()].sort_values(["rank", "t_ns"], kind="stable")
    cols = ["rank", "step", "step_ns", *BUCKETS, "phases_known"]
    if not len(steps):
        return pd.DataFrame({c: pd.Series(dtype="bool" if c == "phases_known" else "int64") for c in cols})
    s_rank = steps["rank"].to_numpy(dtype="int64")
    s_start = steps["t_ns"].to_numpy(dtype="int64")
    s_end = s_start + steps["dur_ns"].to_numpy(dtype="int64")
    same = np.r_[s_rank[1:] == s_rank[:-1], False]
    s_end = np.where(same, np.minimum(s_end, np.r_[s_start[1:], 0]), s_end)
    n = len(steps)
    # (rank, time, column, delta) of every span's ends; column k < len(_LAYERS): that layer's cover
    # count; the last column: the STEP span's index + 1 (STEP spans do not overlap)
    parts = [(s_rank, s_start, np.full(n, len(_LAYERS)), np.arange(1, n + 1)),
             (s_rank, s_end, np.full(n, len(_LAYERS)), -np.arange(1, n + 1))]
    for k, (name, _) in enumerate(_LAYERS):
        m = (x["name"] == name).to_numpy() & (is_phase if name != V.SYNCHRONIZE else True)
        r, t0 = x["rank"].to_numpy(dtype="int64")[m], x["t_ns"].to_numpy(dtype="int64")[m]
        t1 = t0 + x["dur_ns"].to_numpy(dtype="int64")[m]
        parts += [(r, t0, np.full(len(r), k), np.ones(len(r), dtype="int64")),
                  (r, t1, np.full(len(r), k), -np.ones(len(r), dtype="int64"))]
    rank, t, col, delta = (np.concatenate([p[i] for p in parts]).astype("int64") for i in range(4))
    order = np.lexsort((t, rank))
    rank, t, col, delta = rank[order], t[order], col[order], delta[order]
    state = np.zeros((len(t), len(_LAYERS) + 1), dtype="int64")
    state[np.arange(len(t)), col] = delta
    np.cumsum(state, axis=0, out=state)
    seg = np.r_[np.diff(t), 0]                       # from each boundary to the next one
    inside = (state[:, -1] > 0) & (seg > 0) & np.r_[rank[1:] == rank[:-1], False]
    covered = np.c_[state[:, :-1] > 0, np.ones(len(t), dtype=bool)]
    bucket = np.argmax(covered, axis=1)              # the first covering layer, else "other"
    sums = np.zeros((n, len(_LAYERS) + 1), dtype="int64")
    np.add.at(sums, (state[inside, -1] - 1, bucket[inside]), seg[inside])
    out = pd.DataFrame({"rank": s_rank, "step": steps["step"].to_numpy(dtype="int64"), "step_ns": s_end - s_start})
    out[[b for _, b in _LAYERS] + ["other_ns"]] = sums
    if out.duplicated(["rank", "step"]).any():   # mark_step(n) twice with one n: one step of both spans
        out = out.groupby(["rank", "step"], as_index=False, sort=True).sum()
    known = set(x.loc[is_phase, "rank"].tolist())
    out["phases_known"] = out["rank"].isin(known)
    for c in PHASE_BUCKETS:
        out[c] = out[c].astype("Int64").where(out["phases_known"])
    return out[cols]


def _pairs(rank, step):
    return pd.MultiIndex.from_arrays([np.asarray(rank, dtype="int64"), np.asarray(step, dtype="int64")])


def breakdown_by_rank(bd):
    """Per rank, the mean of its steps with a STEP span (else numbered, else all); ``step``: how many."""
    if not len(bd):
        return pd.DataFrame(columns=COLUMNS)
    if (bd["step"] >= 0).any():   # the steps; not the setup before the first (step -1)
        bd = bd[bd["step"] >= 0]
    spans = bd["other_ns"].notna()
    bd = bd[spans | ~spans.groupby(bd["rank"]).transform("any")]   # a rank's steps with a STEP span, if any
    g = bd.drop(columns="phases_known").groupby("rank")
    out = g.mean(numeric_only=True).drop(columns="step").reset_index()
    out.insert(1, "step", g.size().to_numpy())
    out["phases_known"] = bd.groupby("rank")["phases_known"].any().to_numpy()
    return out[COLUMNS]
