"""Priority inversions: a tensor that waited while a lower-priority response ran on its rank."""
from __future__ import annotations

import numpy as np
import pandas as pd

CAUSES = ("running", "not_ready", "ordered_ahead")
COLUMNS = ["rank", "tensor", "step", "occurrence", "priority", "submit_ns", "start_ns", "behind_ns",
           "responses", "lower_priority", "cause", "last_rank", *[f"{c}_ns" for c in CAUSES]]


def waits_behind_lower(tensor_ops, fused_ops):
    """One row per op that waited behind lower-priority responses, by cause, the longest first."""
    empty = pd.DataFrame({c: [] for c in COLUMNS})
    if not len(tensor_ops) or not len(fused_ops):
        return empty
    # only the columns read: a row filter of the whole tables copied every column of the biggest ones
    ops = tensor_ops.loc[tensor_ops["priority"].notna() & tensor_ops["start_ns"].notna(), [
        "rank", "tensor", "step", "occurrence", "process_set", "priority", "response", "submit_ns", "start_ns"]]
    fused = fused_ops.loc[fused_ops["priority"].notna(), ["rank", "response", "start_ns", "end_ns", "priority"]]
    if not len(ops) or not len(fused) or int(ops["priority"].max()) <= int(fused["priority"].min()):
        return empty
    keys = ["tensor", "occurrence", "process_set"]
    ready = tensor_ops[[*keys, "submit_ns", "rank"]].sort_values("submit_ns").groupby(keys, sort=False).agg(
        ready_ns=("submit_ns", "max"), last_rank=("rank", "last")).reset_index()
    ops = ops[ops["priority"] > int(fused["priority"].min())].merge(ready, on=keys, how="left")
    negotiated = tensor_ops.loc[tensor_ops["negotiated_ns"].notna(), ["rank", "response", "negotiated_ns"]]
    decided = negotiated.groupby(["rank", "response"])["negotiated_ns"].min().rename("decided_ns").reset_index()
    fused = fused.merge(decided, on=["rank", "response"], how="left")
    fused["decided_ns"] = fused["decided_ns"].fillna(fused["start_ns"])
    rows = []
    by_rank = dict(tuple(fused.groupby("rank", sort=False)))   # one pass, not a scan of every response per rank
    for rank, mine in ops.groupby("rank", sort=False):
        theirs = by_rank.get(rank, fused.iloc[:0]).sort_values("start_ns")
        f_start = theirs["start_ns"].to_numpy(np.int64)
        f_end = theirs["end_ns"].to_numpy(np.int64)
        f_prio = theirs["priority"].to_numpy(np.int64)
        f_resp = theirs["response"].to_numpy(np.int64)
        f_decided = theirs["decided_ns"].to_numpy(np.int64)
        for op in mine.itertuples(index=False):
            t0, t1 = int(op.submit_ns), int(op.start_ns)
            hi = int(np.searchsorted(f_start, t1, side="left"))   # started before the op's own start
            idx = np.flatnonzero((f_end[:hi] > t0) & (f_prio[:hi] < int(op.priority))
                                 & (f_resp[:hi] != int(op.response)))
            if not len(idx):
                continue
            a = np.maximum(f_start[idx], t0)
            b = np.minimum(f_end[idx], t1)
            ready_ns = int(op.ready_ns) if op.ready_ns == op.ready_ns else t0
            cause = np.where(f_start[idx] < t0, 0, np.where(f_decided[idx] < ready_ns, 1, 2))
            split = [int((b - a)[cause == k].clip(min=0).sum()) for k in range(3)]
            behind = sum(split)
            if behind <= 0:
                continue
            rows.append({"rank": int(rank), "tensor": op.tensor, "step": int(op.step),
                         "occurrence": int(op.occurrence), "priority": int(op.priority),
                         "submit_ns": t0, "start_ns": t1, "behind_ns": behind, "responses": len(idx),
                         "lower_priority": int(f_prio[idx].max()), "cause": CAUSES[int(np.argmax(split))],
                         "last_rank": int(op.last_rank),
                         **{f"{c}_ns": v for c, v in zip(CAUSES, split)}})
    if not rows:
        return empty
    return pd.DataFrame(rows, columns=COLUMNS).sort_values("behind_ns", ascending=False, ignore_index=True)
