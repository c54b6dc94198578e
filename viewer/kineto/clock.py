"""Clock offsets between the ranks of a Kineto run, from the synchronising collectives they share (docs/KINETO.md)."""
from __future__ import annotations

import numpy as np

SYNCHRONISING = ("ALLREDUCE", "ALLGATHER", "REDUCESCATTER", "ALLTOALL", "BARRIER")


def _spans(p: dict):
    """``{(tensor, step): (start, end)}`` of a parsed file's synchronising collectives, its own clock."""
    base = p["rank_info"].get("base_epoch_ns")
    if base is None:
        return None
    ops = p["tensor_ops"]
    ops = ops[ops["op"].isin(SYNCHRONISING) & ops["start_ns"].notna() & ops["done_ns"].notna()]
    return {(t, s): (base + int(a), base + int(b)) for t, s, a, b in
            zip(ops["tensor"], ops["step"], ops["start_ns"], ops["done_ns"])}


def estimate(parsed: list[dict]) -> dict:
    """``{rank: (offset_ns, uncertainty_ns)}`` of the ranks sharing collectives with the lowest one (0, 0)."""
    spans = {p["rank_info"]["rank"]: s for p in parsed if (s := _spans(p))}
    if len(spans) < 2:
        return {}
    ref = min(spans)
    out = {ref: (0, 0)}
    for rank, mine in spans.items():
        if rank == ref:
            continue
        keys = [k for k in mine if k in spans[ref]]
        if not keys:
            continue
        (s_r, e_r), (s_0, e_0) = (np.array([d[k] for k in keys], dtype="int64").T for d in (mine, spans[ref]))
        lo, hi = int((s_r - e_0).max()), int((e_r - s_0).min())
        if lo <= hi:
            offset, unc = (lo + hi) // 2, (hi - lo + 1) // 2
        else:
            offset, unc = int(np.median(e_r - e_0)), (lo - hi + 1) // 2
        out[rank] = (int(round(offset / 1000)) * 1000, max(unc, 500))
    return out


def apply(parsed: list[dict]) -> None:
    """Set ``clock_offset_ns`` / ``clock_offset_uncertainty_ns`` of the Kineto files in ``parsed``."""
    kineto = [p for p in parsed if p["rank_info"].get("format") == "kineto"]
    offsets = estimate(kineto)
    for p in kineto:
        if (ri := p["rank_info"])["rank"] in offsets:
            ri["clock_offset_ns"], ri["clock_offset_uncertainty_ns"] = offsets[ri["rank"]]
