"""A synthetic but realistic run, built directly as schema tables (no trace file, no runtime).

Used by the dashboard's scale tests and by ``bench/dashboard_first_view.py`` to put a run of a
chosen size (e.g. one million events) in front of the dashboard. The shape follows what the runtime
emits (see ``docs/ARCHITECTURE.md``): per rank and step a STEP span with a nested SYNCHRONIZE wait,
per tensor a SUBMIT instant and an async lifecycle with NEGOTIATE_ALLREDUCE and QUEUE, per fused
response a FUSED_RESPONSE with memcpy in/out and a RING_ALLREDUCE with its two sub-phases, and the
coordinator's READY ticks. One rank (``slow_rank``) submits late, so it is the straggler.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from viewer.schema import TABLES, RunTables



def events_per_rank_step(tensors: int, group: int) -> int:
    """Events one rank records per step with ``tensors`` tensors fused ``group`` at a time."""
    responses = -(-tensors // group)
    return 2 + 4 * tensors + 6 * responses


def typed(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """``df`` with exactly the columns of schema table ``table``, cast to their dtypes."""
    cols = TABLES[table]
    for name in cols:
        if name not in df:
            kind = cols[name]
            fill = np.nan if kind.startswith("float") else -1 if kind in ("int64", "int32") else pd.NA
            df[name] = pd.Series(fill, index=df.index, dtype=kind)
    return df[list(cols)].astype(cols)


def make_run(n_events: int = 100_000, ranks: int = 4, tensors: int = 40, group: int = 8,
             slow_rank: int = 2, slow_ms: float = 6.0, seed: int = 0) -> RunTables:
    """A run of about ``n_events`` events over ``ranks`` ranks (whole steps, so slightly more)."""
    rng = np.random.default_rng(seed)
    per_step = events_per_rank_step(tensors, group) * ranks
    steps = max(1, -(-n_events // per_step))
    S, R, T = steps, ranks, tensors
    G = -(-T // group)
    step_ns = 120_000_000
    compute_ns = 60_000_000
    t_step = (np.arange(S, dtype=np.int64) * step_ns)[:, None, None]
    delay = rng.integers(0, 400_000, size=(S, R, 1))
    delay[:, slow_rank % R, :] += int(slow_ms * 1e6)
    k = np.arange(T)[None, None, :]
    submit = t_step + (compute_ns * (k + 1)) // T + delay                      # (S, R, T)
    tbytes = (rng.integers(1, 64, size=T) * 65536).astype(np.int64)            # per tensor
    gid = np.arange(T) // group
    # a response is negotiated once its last tensor is ready on every rank
    last_ready = submit.max(axis=1)                                            # (S, T)
    neg_g = np.stack([last_ready[:, gid == g].max(axis=1) for g in range(G)], axis=1) + 150_000
    gbytes = np.array([tbytes[gid == g].sum() for g in range(G)])
    gcount = np.array([(gid == g).sum() for g in range(G)])
    comm = (80_000 + gbytes * 1e9 / 2.0e9 * 1.5).astype(np.int64)              # alpha + S/beta
    memcpy = (gbytes / 8.0).astype(np.int64) * (gcount > 1)
    start_g = np.empty((S, G), dtype=np.int64)
    end_g = np.empty((S, G), dtype=np.int64)
    prev = neg_g[:, 0]
    for g in range(G):
        start_g[:, g] = np.maximum(neg_g[:, g], prev)
        end_g[:, g] = start_g[:, g] + memcpy[g] * 2 + comm[g]
        prev = end_g[:, g]
    rank_idx = np.broadcast_to(np.arange(R)[None, :, None], (S, R, T))
    step_idx = np.broadcast_to(np.arange(S)[:, None, None], (S, R, T))
    names = np.array([f"allreduce.layer{t:02d}.weight" for t in range(T)], dtype=object)
    neg_t = np.broadcast_to(neg_g[:, gid][:, None, :], (S, R, T))
    start_t = np.broadcast_to(start_g[:, gid][:, None, :], (S, R, T))
    done_t = np.broadcast_to(end_g[:, gid][:, None, :], (S, R, T))
    response = (np.arange(S)[:, None] * G + np.arange(G)[None, :])             # (S, G)
    resp_t = np.broadcast_to(response[:, gid][:, None, :], (S, R, T))
    sync_start = (t_step[:, :, 0] + compute_ns + delay[:, :, 0])                # (S, R)
    sync_end = np.broadcast_to(end_g[:, -1:], (S, R))

    flat = lambda a: np.ascontiguousarray(a).reshape(-1)  # noqa: E731
    tname = np.broadcast_to(names[None, None, :], (S, R, T))
    tb = np.broadcast_to(tbytes[None, None, :], (S, R, T))
    tensor_ops = typed(pd.DataFrame({
        "rank": flat(rank_idx), "tensor": flat(tname), "step": flat(step_idx), "op": "ALLREDUCE",
        "dtype": "float32", "bytes": flat(tb), "process_set": 0, "response": flat(resp_t),
        "submit_ns": flat(submit), "negotiated_ns": flat(neg_t), "start_ns": flat(start_t),
        "done_ns": flat(done_t)}), "tensor_ops")

    parts = []

    def ev(rank, thread, name, cat, t, dur, depth, ph="X", tensor=None, step=None, resp=None, nbytes=None):
        n = len(t)
        parts.append(pd.DataFrame({
            "rank": rank, "thread": thread, "name": name, "cat": cat, "ph": ph, "t_ns": t,
            "dur_ns": dur, "tensor": tensor if tensor is not None else pd.NA,
            "step": step if step is not None else np.full(n, -1), "response": resp if resp is not None
            else np.full(n, -1), "bytes": nbytes if nbytes is not None else pd.NA, "depth": depth}))

    sr_rank = flat(np.broadcast_to(np.arange(R)[None, :], (S, R)))
    sr_step = flat(np.broadcast_to(np.arange(S)[:, None], (S, R)))
    ev(sr_rank, "framework", "STEP", "framework", flat(np.broadcast_to(t_step[:, :, 0], (S, R))),
       np.full(S * R, step_ns - 1), 0, step=sr_step)
    ev(sr_rank, "framework", "SYNCHRONIZE", "framework", flat(sync_start), flat(sync_end - sync_start), 1,
       step=sr_step)
    r_t, s_t, sub_t = flat(rank_idx), flat(step_idx), flat(submit)
    ev(r_t, "framework", "SUBMIT", "framework", sub_t, 0, 1, ph="i", tensor=flat(tname), step=s_t)
    ev(r_t, "tensor", flat(tname), "tensor", sub_t, flat(done_t) - sub_t, 0, tensor=flat(tname), step=s_t,
       resp=flat(resp_t), nbytes=flat(tb))
    ev(r_t, "tensor", "NEGOTIATE_ALLREDUCE", "tensor", sub_t, flat(neg_t) - sub_t, 1, tensor=flat(tname),
       step=s_t)
    ev(r_t, "tensor", "QUEUE", "tensor", flat(neg_t), flat(start_t) - flat(neg_t), 1, tensor=flat(tname),
       step=s_t)

    sg_rank = flat(np.broadcast_to(np.arange(R)[None, :, None], (S, R, G)))
    sg_step = flat(np.broadcast_to(np.arange(S)[:, None, None], (S, R, G)))
    sg = lambda a: flat(np.broadcast_to(a[:, None, :], (S, R, G)))  # noqa: E731
    sg1 = lambda a: flat(np.broadcast_to(a[None, None, :], (S, R, G)))  # noqa: E731
    st, en, rp = sg(start_g), sg(end_g), sg(response)
    mc, cm, gb = sg1(memcpy), sg1(comm), sg1(gbytes)
    ev(sg_rank, "fusion", "FUSED_RESPONSE", "fusion", st, en - st, 0, step=sg_step, resp=rp, nbytes=gb)
    ev(sg_rank, "fusion", "MEMCPY_IN_FUSION_BUFFER", "memcpy", st, mc, 1, step=sg_step, resp=rp)
    ev(sg_rank, "fusion", "MEMCPY_OUT_FUSION_BUFFER", "memcpy", en - mc, mc, 1, step=sg_step, resp=rp)
    cs = st + mc
    ev(sg_rank, "backend", "RING_ALLREDUCE", "comm", cs, cm, 0, step=sg_step, resp=rp, nbytes=gb)
    ev(sg_rank, "backend", "RING_REDUCE_SCATTER", "comm", cs, cm // 2, 1, step=sg_step, resp=rp)
    ev(sg_rank, "backend", "RING_ALLGATHER", "comm", cs + cm // 2, cm - cm // 2, 1, step=sg_step, resp=rp)
    events = typed(pd.concat(parts, ignore_index=True), "events")
    events = events.sort_values(["rank", "t_ns"], kind="stable", ignore_index=True)

    fused = typed(pd.DataFrame({
        "rank": sg_rank, "response": rp, "step": sg_step, "op": "ALLREDUCE", "backend": "ring",
        "activity": "RING_ALLREDUCE", "dtype": "float32", "count": sg1(gcount), "bytes": gb,
        "threshold": 64 << 20, "start_ns": st, "end_ns": en, "memcpy_in_ns": mc, "memcpy_out_ns": mc,
        "comm_ns": cm, "size": R}), "fused_ops")
    fused["tensors"] = [list(names[gid == g]) for g in np.tile(np.arange(G), S * R)]

    ready = submit + 30_000
    readiness = typed(pd.DataFrame({
        "tensor": flat(tname), "step": s_t, "occurrence": s_t, "rank": r_t, "ready_ns": flat(ready),
        "source": "ringscope"}), "readiness")
    ranks_df = typed(pd.DataFrame({
        "rank": np.arange(R), "host": "synthetic", "pid": 1000 + np.arange(R), "local_rank": np.arange(R),
        "size": R, "backend": "ring", "base_epoch_ns": 0, "clock_offset_ns": 0,
        "clock_offset_uncertainty_ns": 0, "file": [f"rank{r}.json" for r in range(R)],
        "format": "ringscope", "truncated": False, "events_dropped": 0}), "ranks")
    cycles = typed(pd.DataFrame({c: [] for c in TABLES["cycles"]}), "cycles")
    meta = {"origin_epoch_ns": 1_700_000_000_000_000_000, "size": R, "fusion_threshold": 64 << 20,
            "cycle_time_ms": 1.0, "backend": "ring", "source": "synthetic", "files": []}
    return RunTables(events=events, tensor_ops=tensor_ops, fused_ops=fused, readiness=readiness,
                     cycles=cycles, ranks=ranks_df, meta=meta)
