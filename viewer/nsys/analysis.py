"""What the GPU did during each collective (pure functions: DataFrame -> DataFrame).

Inputs are the run's ``events`` table with the overlay's GPU rows in it (threads ``gpu:<stream>``,
``cat`` "nccl" or "kernel", ``response`` set from the launching backend span) and optionally
``fused_ops`` for op/bytes/backend columns.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from viewer.nsys.overlay import CAT_NCCL, GPU_THREAD_PREFIX

COMM_GPU_COLUMNS = [
    "rank", "response", "step", "activity", "cpu_start_ns", "cpu_ns", "kernels", "nccl_kernels",
    "nccl_kernel_ns", "overhead_ns", "launch_delay_ns", "sync_tail_ns", "gpu_busy_ns",
    "gpu_idle_ns", "kernel_share",
]


def _union(starts: np.ndarray, ends: np.ndarray):
    """Merged intervals of (starts, ends), sorted."""
    if len(starts) == 0:
        return []
    order = np.argsort(starts, kind="stable")
    out = []
    cs, ce = int(starts[order[0]]), int(ends[order[0]])
    for i in order[1:]:
        s, e = int(starts[i]), int(ends[i])
        if s <= ce:
            ce = max(ce, e)
        else:
            out.append((cs, ce))
            cs, ce = s, e
    out.append((cs, ce))
    return out


def _covered(iv) -> int:
    return sum(e - s for s, e in iv)


def gpu_rows(events):
    """The overlay's kernel rows of an events table."""
    return events[events["thread"].str.startswith(GPU_THREAD_PREFIX, na=False)]


def comm_gpu_times(events, fused_ops=None):
    """Per fused op per rank: NCCL kernel time against the CPU-observed op time.

    ``cpu_ns`` is the backend activity's span (what the runtime saw: launch, wait, sync);
    ``nccl_kernel_ns`` the union of its NCCL kernels' time; ``overhead_ns`` the difference;
    ``launch_delay_ns`` activity start -> first NCCL kernel start; ``sync_tail_ns`` last NCCL kernel
    end -> activity end; ``gpu_idle_ns`` gaps between the op's kernels (any stream) between its first
    kernel start and last kernel end; ``kernel_share`` = nccl_kernel_ns / cpu_ns.
    """
    gpu = gpu_rows(events)
    gpu = gpu[gpu["response"] >= 0]
    back = events[(events["thread"] == "backend") & (events["ph"] == "X") & (events["response"] >= 0)]
    if "depth" in back:
        back = back[back["depth"] == 0]
    kern = {k: g for k, g in gpu.groupby(["rank", "response"])}
    rows = []
    for b in back.itertuples(index=False):
        g = kern.get((b.rank, b.response))
        cpu_start, cpu_end = int(b.t_ns), int(b.t_ns + b.dur_ns)
        if g is None or g.empty:
            rows.append((b.rank, b.response, b.step, b.name, cpu_start, int(b.dur_ns), 0, 0, 0,
                         int(b.dur_ns), pd.NA, pd.NA, 0, 0, 0.0))
            continue
        s = g["t_ns"].to_numpy(dtype="int64")
        e = s + g["dur_ns"].to_numpy(dtype="int64")
        nccl = (g["cat"] == CAT_NCCL).to_numpy()
        all_iv = _union(s, e)
        nccl_iv = _union(s[nccl], e[nccl])
        busy = _covered(all_iv)
        idle = (all_iv[-1][1] - all_iv[0][0]) - busy
        nk = _covered(nccl_iv)
        delay = (nccl_iv[0][0] - cpu_start) if nccl_iv else pd.NA
        tail = (cpu_end - nccl_iv[-1][1]) if nccl_iv else pd.NA
        share = nk / b.dur_ns if b.dur_ns > 0 else 0.0
        rows.append((b.rank, b.response, b.step, b.name, cpu_start, int(b.dur_ns), len(g),
                     int(nccl.sum()), nk, int(b.dur_ns) - nk, delay, tail, busy, idle, share))
    out = pd.DataFrame(rows, columns=COMM_GPU_COLUMNS).astype({
        "rank": "int32", "response": "int64", "step": "int64", "activity": "string",
        "cpu_start_ns": "int64", "cpu_ns": "int64", "kernels": "int32", "nccl_kernels": "int32",
        "nccl_kernel_ns": "int64", "overhead_ns": "int64", "launch_delay_ns": "Int64",
        "sync_tail_ns": "Int64", "gpu_busy_ns": "int64", "gpu_idle_ns": "int64",
        "kernel_share": "float64"})
    if fused_ops is not None and len(fused_ops):
        extra = fused_ops[["rank", "response", "op", "backend", "bytes", "count"]]
        out = out.merge(extra, on=["rank", "response"], how="left")
    return out.sort_values(["response", "rank"], kind="stable").reset_index(drop=True)


def gpu_idle_during_comm(events):
    """Per rank: time in communication, GPU busy and idle inside it, and the idle share.

    Communication time is the union of the rank's backend activities; GPU busy is the union of all
    its kernels clipped to that time.
    """
    gpu = gpu_rows(events)
    back = events[(events["thread"] == "backend") & (events["ph"] == "X") & (events["response"] >= 0)]
    if "depth" in back:
        back = back[back["depth"] == 0]
    rows = []
    for rank, b in back.groupby("rank"):
        comm = _union(b["t_ns"].to_numpy(dtype="int64"), (b["t_ns"] + b["dur_ns"]).to_numpy(dtype="int64"))
        comm_ns = _covered(comm)
        g = gpu[gpu["rank"] == rank]
        busy_iv = _union(g["t_ns"].to_numpy(dtype="int64"), (g["t_ns"] + g["dur_ns"]).to_numpy(dtype="int64"))
        busy = 0
        i = 0
        for cs, ce in comm:   # both lists are sorted and disjoint: a linear sweep
            while i < len(busy_iv) and busy_iv[i][1] <= cs:
                i += 1
            j = i
            while j < len(busy_iv) and busy_iv[j][0] < ce:
                busy += min(ce, busy_iv[j][1]) - max(cs, busy_iv[j][0])
                j += 1
        rows.append((rank, comm_ns, busy, comm_ns - busy,
                     (comm_ns - busy) / comm_ns if comm_ns else 0.0, len(g)))
    return pd.DataFrame(rows, columns=["rank", "comm_ns", "gpu_busy_ns", "gpu_idle_ns",
                                       "idle_share", "kernels"]).astype(
        {"rank": "int32", "comm_ns": "int64", "gpu_busy_ns": "int64", "gpu_idle_ns": "int64",
         "idle_share": "float64", "kernels": "int64"})
