"""A run's ranks at a glance, however many: rank × step matrices (step time, lateness, exposed communication) from
its analyses, the ranks that stand out in each, and the ranks the timeline opens on (the outliers first)."""
from __future__ import annotations

import numpy as np
import pandas as pd

MANY_RANKS = 64   # past this many, the views show distributions and outliers, not a row or a lane per rank
TOP = 5           # outliers listed per metric
OPEN_LANES = 8    # ranks the timeline of a run of more than MANY_RANKS opens on
# key: (the choice's label, a cell's meaning in the hover, the colour bar's title)
METRICS = {
    "lateness": ("lateness", "behind the first ready rank", "ms late"),
    "step": ("step time", "step time", "ms"),
    "exposed": ("exposed communication", "exposed communication", "ms exposed"),
}


def matrices(run) -> dict[str, pd.DataFrame]:
    """Per metric the run has (keys of ``METRICS``): ranks × steps, ns (NaN: no value for that rank and step)."""
    out = {}
    if run.why_not("negotiations") is None and len(run.negotiations()):
        out["lateness"] = run.lateness().astype("float64")
    st = run.step_times()
    st = st[st["step"] >= 0]
    if len(st):
        out["step"] = _pivot(st, "dur_ns")
    for name in ("breakdown_steps", "kineto_steps"):   # the runtime's steps, else torch.profiler's (as the headline)
        if run.why_not(name) is None and "exposed" not in out:
            b = run.get(name)
            b = b[(b["step"] >= 0) & b["exposed_comm_ns"].notna()]
            if len(b):
                out["exposed"] = _pivot(b, "exposed_comm_ns")
    return out


def _pivot(df: pd.DataFrame, col: str) -> pd.DataFrame:
    d = pd.DataFrame({"rank": df["rank"].to_numpy(dtype="int64"), "step": df["step"].to_numpy(dtype="int64"),
                      "v": df[col].to_numpy(dtype="float64", na_value=np.nan)})
    return d.pivot_table(index="rank", columns="step", values="v", aggfunc="mean").sort_index()


def ranked(matrix: pd.DataFrame, top: int = TOP) -> pd.DataFrame:
    """The ``top`` ranks with the highest mean over steps (``rank, mean_ns, median_ns``: the ranks' median
    beside it), highest first; none where every rank has the same mean (nothing stands out)."""
    mean = matrix.mean(axis=1, skipna=True).dropna()
    if not len(mean) or mean.max() <= mean.min():
        return pd.DataFrame({"rank": [], "mean_ns": [], "median_ns": []})
    worst = mean.sort_values(ascending=False, kind="stable").head(top)
    return pd.DataFrame({"rank": worst.index.astype("int64"), "mean_ns": worst.to_numpy(),
                         "median_ns": float(mean.median())})


def outlier_ranks(run, mats: dict | None = None) -> list[int]:
    """The ranks that stand out, most telling first: the headline's late rank, then the top of each metric
    (lateness, step time, exposed communication) in turn."""
    mats = matrices(run) if mats is None else mats
    lists = [ranked(m)["rank"].tolist() for m in mats.values()]
    late = run.headline()["late_rank"]
    order = [late] if late is not None else []
    for k in range(TOP):
        order += [ranks[k] for ranks in lists if k < len(ranks)]
    return [int(r) for r in dict.fromkeys(order)]


def timeline_ranks(all_ranks: list, outliers: list) -> tuple[list, list | None]:
    """(the ranks in the timeline's choice, outliers first; the ranks it opens on: None, every rank, unless
    there are more than ``MANY_RANKS``, then the first ``OPEN_LANES`` outliers, else the first ranks)."""
    known = set(all_ranks)
    first = [r for r in outliers if r in known]
    order = first + [r for r in all_ranks if r not in set(first)]
    return order, None if len(all_ranks) <= MANY_RANKS else order[:OPEN_LANES]
