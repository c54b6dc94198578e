"""Hangs: tensors some ranks submitted and others never submitted or never completed."""
from __future__ import annotations

COLUMNS = ["tensor", "step", "occurrence", "kind", "submitted_ranks", "missing_ranks", "unfinished_ranks",
           "first_submit_ns", "waited_ns"]


def incomplete_tensors(tables, size: int | None = None):
    """Tensor operations that never completed everywhere (works on truncated traces).

    Args:
        tables: :class:`viewer.schema.RunTables`.
        size: ranks in the run (default: metadata).
    Returns:
        DataFrame with ``COLUMNS``, one row per (tensor, step/occurrence). ``kind`` is "missing" when some
        ranks never submitted it (``missing_ranks``: from each rank's own trace where loaded, else from the
        coordinator's readiness ticks) or "unfinished" when all submitted but some never got the result
        (``unfinished_ranks``). ``waited_ns`` = trace end − first submit.
    """
    import pandas as pd

    size = int(size or tables.meta.get("size") or 0)
    ops = tables.tensor_ops
    rd = tables.readiness
    loaded = set(tables.ranks["rank"].tolist()) if len(tables.ranks) else set()
    end = int(tables.meta.get("end_ns") or 0)
    keyed = ops.assign(key=ops["step"].where(ops["step"] >= 0, ops["occurrence"]))
    rkeyed = rd.assign(key=rd["step"].where(rd["step"] >= 0, rd["occurrence"]))
    ready_by: dict = {}
    for k, r in zip(zip(rkeyed["tensor"].tolist(), rkeyed["key"].tolist()), rkeyed["rank"].tolist()):
        ready_by.setdefault(k, set()).add(r)
    # ranks we can judge: those with a trace of their own, plus all when the coordinator's ticks exist
    judged = (set(range(size)) if size else set()) if len(rd) else set(loaded)
    judged |= loaded
    everyone = set(range(size)) if size else judged
    # only groups where some rank lacks a result can be incomplete: find them vectorised first
    agg = keyed.assign(has_done=keyed["done_ns"].notna()).groupby(["tensor", "key"]).agg(
        n=("rank", "nunique"), done=("has_done", "sum"))
    suspects = agg[(agg["done"] < agg["n"]) | (agg["done"] == 0)].index
    rows = []
    if len(suspects):
        sub = keyed.set_index(["tensor", "key"]).loc[suspects].reset_index()
        groups = sub.groupby(["tensor", "key"])
    else:
        groups = []
    for (tensor, key), g in groups:
        submitted = set(g["rank"].tolist()) | ready_by.get((tensor, key), set())
        done = set(g.loc[g["done_ns"].notna(), "rank"].tolist())
        # a result on any rank means the collective ran, so every rank took part
        missing = [] if done else sorted((everyone & judged) - submitted)
        unfinished = sorted((submitted & loaded) - done)
        if not missing and not unfinished:
            continue
        first = int(g["submit_ns"].min())
        rows.append({"tensor": tensor, "step": int(g["step"].max()), "occurrence": int(g["occurrence"].min()),
                     "kind": "missing" if missing else "unfinished", "submitted_ranks": sorted(submitted),
                     "missing_ranks": missing, "unfinished_ranks": unfinished, "first_submit_ns": first,
                     "waited_ns": max(end - first, 0)})
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values(["kind", "first_submit_ns"], ignore_index=True)


def hangs_by_rank(hang_df):
    """Per missing rank: how many tensors it never submitted and which (the stall inspector's view).

    Args:
        hang_df: output of :func:`incomplete_tensors`.
    Returns:
        DataFrame ``rank, tensors, first_step, first_submit_ns, waiting_ranks, names`` (names: up to 10,
        earliest first), ordered by ``first_submit_ns``: the first row is the root cause (ranks missing
        later tensors are usually the ones left waiting while the culprit ran ahead).
    """
    import pandas as pd

    rows = {}
    missing = hang_df[hang_df["kind"] == "missing"].sort_values("first_submit_ns")
    for r in missing.itertuples(index=False):
        for m in r.missing_ranks:
            e = rows.setdefault(m, {"rank": m, "tensors": 0, "first_step": r.step,
                                    "first_submit_ns": r.first_submit_ns, "waiting_ranks": list(r.submitted_ranks),
                                    "names": []})
            e["tensors"] += 1
            e["first_step"] = min(e["first_step"], r.step)
            if len(e["names"]) < 10:
                e["names"].append(r.tensor)
    cols = ["rank", "tensors", "first_step", "first_submit_ns", "waiting_ranks", "names"]
    return pd.DataFrame(list(rows.values()), columns=cols).sort_values("first_submit_ns", ignore_index=True)
