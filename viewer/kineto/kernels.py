"""GPU work of Kineto runs: which kernels count, and of what kind (HTA's conventions, docs/KINETO.md)."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from viewer.kineto.comms import COMM_KERNEL

WORK_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
KINDS = ("compute", "communication", "memory", "other")   # what kernel_kind says
_MEMORY = re.compile(r"^(Memcpy|Memset|dma)")
_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


def kernel_kind(name: str) -> str:
    """compute | communication | memory | other."""
    if COMM_KERNEL.match(name):
        return "communication"
    if _MEMORY.match(name):
        return "memory"
    return "other" if _NOT_COMPUTE.match(name) else "compute"


def step_spans(events):
    """``rank, step, start_ns, end_ns`` of each ProfilerStep#N span."""
    ev = events[(events["name"].str.startswith("ProfilerStep#")) & events["thread"].str.startswith("cpu:")]
    out = pd.DataFrame({"rank": ev["rank"].to_numpy(), "step": ev["step"].to_numpy(),
                        "start_ns": ev["t_ns"].to_numpy(), "end_ns": (ev["t_ns"] + ev["dur_ns"]).to_numpy()})
    return out.sort_values(["rank", "start_ns"], ignore_index=True)


def gpu_work(tables, include_last_step: bool = False, hta_rounding: bool = True):
    """The GPU work each rank's analyses count: ``rank, thread, name, t_ns, end_ns, step, launch_ns, kind``."""
    events = tables.events
    g = events[events["cat"].isin(WORK_CATS)]
    out = pd.DataFrame({"rank": g["rank"].to_numpy(), "thread": g["thread"].to_numpy(),
                        "name": g["name"].array, "t_ns": g["t_ns"].to_numpy(),
                        "end_ns": (g["t_ns"] + g["dur_ns"]).to_numpy(), "step": g["step"].to_numpy()})
    out["launch_ns"] = g["launch_ns"].to_numpy(dtype="float64", na_value=np.nan)   # a Kineto run's events have it
    spans = step_spans(events).groupby("rank")
    last = spans["end_ns" if include_last_step else "start_ns"].max()[spans.size() >= 2]   # a one-step rank keeps all
    limit = out["rank"].map(last).to_numpy(dtype="float64")
    launched = out["launch_ns"].to_numpy()
    out = out[np.isnan(limit) | ((launched <= limit) if include_last_step else (launched < limit))]
    out = out.reset_index(drop=True)
    if hta_rounding and len(out):
        phase = _phases(tables, out["rank"].to_numpy())
        t = out["t_ns"].to_numpy() + phase
        e = out["end_ns"].to_numpy() + phase
        out["t_ns"] = -((-t) // 1000) * 1000 - phase
        out["end_ns"] = (e // 1000) * 1000 - phase
    kinds = {n: kernel_kind(n) for n in pd.unique(out["name"])}
    out["kind"] = out["name"].map(kinds).astype("string")
    return out


def _phases(tables, ranks):
    """Per row, ns to add to a common-axis time to land on its rank's own µs grid (t + origin + offset)."""
    origin = tables.meta.get("origin_epoch_ns") or 0
    r = tables.ranks
    off = dict(zip(r["rank"].tolist(), r["clock_offset_ns"].fillna(0).astype("int64").tolist()))
    table = {k: (origin + v) % 1000 for k, v in off.items()}
    return pd.Series(ranks).map(table).fillna(origin % 1000).to_numpy(dtype="int64")


def union_ns(starts, ends) -> int:
    """Length of the union of [start, end) intervals."""
    s = np.asarray(starts, dtype="int64")
    e = np.asarray(ends, dtype="int64")
    if not len(s):
        return 0
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > reach[:-1]]
    lo = s[new]
    hi = np.maximum.reduceat(e, np.flatnonzero(new))
    return int((hi - lo).sum())
