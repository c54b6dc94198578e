"""Kernel launches of a Kineto run and where the GPU idled (HTA's launch statistics, docs/KINETO.md)."""
from __future__ import annotations

import numpy as np
import pandas as pd

LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
COLUMNS = ["rank", "step", "name", "kind", "t_ns", "end_ns", "launch_ns", "launch_dur_ns", "delay_ns", "gap_ns",
           "host_wait_ns", "waited", "short", "where"]
STATS = ["rank", "work", "launched", "launch_median_ns", "work_median_ns", "delay_median_ns", "short_pct",
         "waited_pct", "launch_bound_pct", "idle_ns", "host_wait_ns", "step_start_idle_ns", "in_step_idle_ns",
         "outside_steps_idle_ns"]
WHERE = ("step start", "in step", "outside steps")


def kernel_launches(tables, work) -> pd.DataFrame:
    """One row per piece of GPU ``work`` (``COLUMNS``), in start order per rank (NaN: no launch call)."""
    if not len(work):
        return pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})
    ev = tables.events
    calls = ev[ev["cat"].isin(LAUNCH_CATS)]
    calls = pd.DataFrame({"rank": calls["rank"].to_numpy(), "launch_ns": calls["t_ns"].to_numpy(dtype="float64"),
                          "launch_dur_ns": calls["dur_ns"].to_numpy(dtype="float64")})
    w = work.merge(calls.drop_duplicates(["rank", "launch_ns"]), on=["rank", "launch_ns"], how="left")
    w = w.sort_values(["rank", "t_ns", "end_ns"], kind="stable", ignore_index=True)
    # where the GPU's work had reached before each piece (NaN for a rank's first)
    before = w["end_ns"].groupby(w["rank"]).cummax().groupby(w["rank"]).shift(1)
    called_end = w["launch_ns"] + w["launch_dur_ns"]
    w["delay_ns"] = w["t_ns"] - called_end
    gap = (w["t_ns"] - before).clip(lower=0).fillna(0)
    w["gap_ns"] = gap.astype("int64")
    w["host_wait_ns"] = (called_end - before).clip(lower=0).fillna(0).clip(upper=gap).astype("int64")
    w["waited"] = (called_end > before).to_numpy(dtype=bool)
    w["short"] = ((w["end_ns"] - w["t_ns"]) < w["launch_dur_ns"]).to_numpy(dtype=bool)
    first = w["launch_ns"] == w.groupby(["rank", "step"])["launch_ns"].transform("min")
    w["where"] = np.where(w["step"] < 0, WHERE[2], np.where(first, WHERE[0], WHERE[1]))
    return w[COLUMNS]


def launch_stats(launches: pd.DataFrame) -> pd.DataFrame:
    """Per rank (``STATS``): launch medians, short / waited-for / launch-bound shares, idle time by where."""
    rows = []
    for rank, g in launches.groupby("rank", sort=True):
        known = g[g["launch_dur_ns"].notna()]
        n = len(known)
        gap = g["gap_ns"].astype("float64")

        def share(mask, n=n):
            return 100.0 * int(mask.sum()) / n if n else float("nan")
        rows.append([int(rank), len(g), n, known["launch_dur_ns"].median(), (g["end_ns"] - g["t_ns"]).median(),
                     known["delay_ns"].median(), share(known["short"]), share(known["waited"]),
                     share(known["short"] & known["waited"]), int(gap.sum()), int(g["host_wait_ns"].sum()),
                     *(int(gap[g["where"] == w].sum()) for w in WHERE)])
    return pd.DataFrame(rows, columns=STATS)
