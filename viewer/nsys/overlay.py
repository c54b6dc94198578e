"""GPU lanes: aligned kernels as events-table rows and as Chrome-trace events."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from viewer import frames

GPU_THREAD_PREFIX = "gpu:"
GPU_TID_BASE = 100_000      # Chrome tid of stream s (clear of the merge's overlap lanes, tid + k*1e6)
CAT_NCCL = "nccl"
CAT_KERNEL = "kernel"
# NCCL's kernels, current (ncclDevKernel_AllReduce_Sum_f32_RING_LL) and older (ncclKernel_AllReduce_RING_LL_Sum_float)
_NCCL = re.compile(r"(?:^|[\s:*&])(nccl(?:Dev)?Kernel)_(\w+)")


def is_nccl_kernel(name) -> bool:
    """True for ``ncclKernel_*`` and ``ncclDevKernel_*`` (also inside a demangled signature)."""
    return isinstance(name, str) and _NCCL.search(name) is not None


def align_kernels(kernels, pid: int, rank: int, offset_ns: int):
    """The kernels of process ``pid`` on the run axis (not yet attributed: response and step -1)."""
    k = kernels[kernels["pid"] == pid]
    out = pd.DataFrame({
        "rank": np.full(len(k), rank, dtype="int32"),
        "t_ns": k["start"].to_numpy(dtype="int64") + offset_ns,
        "dur_ns": (k["end"] - k["start"]).to_numpy(dtype="int64"),
        "name": k["name"].to_numpy(),
        "short_name": k["short_name"].to_numpy(),
        "device": k["device"].to_numpy(),
        "stream": k["stream"].to_numpy(),
        "nccl": np.array([is_nccl_kernel(n) for n in k["name"]], dtype=bool),
        "launch_t_ns": (k["launch_start"] + offset_ns).to_numpy(),
        "response": np.full(len(k), -1, dtype="int64"),
        "step": np.full(len(k), -1, dtype="int64"),
    })
    return out.astype({"name": "string", "short_name": "string", "device": "Int64",
                       "stream": "Int64", "launch_t_ns": "Int64"})


def attribute(aligned, events):
    """Set ``response``/``step`` of each aligned kernel from the outermost backend span containing its launch."""
    aligned = aligned.copy()
    spans = events[(events["thread"] == "backend") & (events["ph"] == "X") & (events["response"] >= 0)
                   & (events["depth"] == 0)]
    for rank, idx in aligned.groupby("rank").groups.items():
        win = spans[spans["rank"] == rank].sort_values("t_ns")
        if win.empty:
            continue
        ws = win["t_ns"].to_numpy(dtype="int64")
        we = ws + win["dur_ns"].to_numpy(dtype="int64")
        sub = aligned.loc[idx]
        when = sub["launch_t_ns"].fillna(sub["t_ns"]).to_numpy(dtype="int64")
        j = np.searchsorted(ws, when, side="right") - 1
        ok = (j >= 0) & (when <= we[np.clip(j, 0, None)])
        jj = np.clip(j, 0, None)
        aligned.loc[idx, "response"] = np.where(ok, win["response"].to_numpy()[jj], -1)
        aligned.loc[idx, "step"] = np.where(ok, win["step"].to_numpy()[jj], -1)
    return aligned


def gpu_event_rows(aligned):
    """Events-table rows for aligned kernels, thread ``gpu:<stream>``."""
    n = len(aligned)
    return frames.conform("events", pd.DataFrame({
        "rank": aligned["rank"].to_numpy(),
        "thread": [f"{GPU_THREAD_PREFIX}{s}" for s in aligned["stream"].astype("object")],
        "name": aligned["name"].to_numpy(),
        "cat": np.where(aligned["nccl"].to_numpy(dtype=bool), CAT_NCCL, CAT_KERNEL),
        "ph": ["X"] * n, "t_ns": aligned["t_ns"].to_numpy(dtype="int64"),
        "dur_ns": aligned["dur_ns"].to_numpy(dtype="int64"), "step": aligned["step"].to_numpy(dtype="int64"),
        "response": aligned["response"].to_numpy(dtype="int64"), "value": np.full(n, np.nan),
        "depth": np.zeros(n, dtype="int32")}))


def chrome_events(aligned, ts_origin_ns: int = 0) -> list[dict]:
    """Chrome-trace events: a named thread per (rank, stream), ``ts`` µs from ``ts_origin_ns`` on the run axis."""
    out = []
    for (rank, stream), g in aligned.groupby(["rank", "stream"], sort=True):
        tid = GPU_TID_BASE + int(stream)
        out.append({"name": "thread_name", "ph": "M", "pid": int(rank), "tid": tid,
                    "args": {"name": f"{GPU_THREAD_PREFIX}{int(stream)}"}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": int(rank), "tid": tid,
                    "args": {"sort_index": tid}})
        for r in g.itertuples(index=False):
            args = {"stream": int(stream), "kernel": r.short_name if isinstance(r.short_name, str) else r.name}
            if not pd.isna(r.device):
                args["device"] = int(r.device)
            if r.response >= 0:
                args["response"] = int(r.response)
                args["step"] = int(r.step)
            out.append({"name": r.name, "cat": CAT_NCCL if r.nccl else CAT_KERNEL, "ph": "X",
                        "pid": int(rank), "tid": tid, "ts": (int(r.t_ns) - ts_origin_ns) / 1000.0,
                        "dur": int(r.dur_ns) / 1000.0, "args": args})
    return out
