"""Why a late rank is late: its phases against the other ranks', step by step, and its counters.

For each rank flagged late (:func:`viewer.analyses.stragglers.late_ranks`) and each step, every
phase bucket of the step breakdown (:func:`viewer.analyses.breakdown.phase_buckets`) is compared with
the median of the other ranks' in that step; the median of those differences over the steps is the
phase's excess per step. The rank's lateness per step is how much later its last gradient was
submitted than the others' median. A phase explains the lateness when its excess is at least
``MIN_EFFECT_NS`` and ``MIN_EFFECT_OF_STEP`` of the step, and at least ``MIN_SHARE`` of the lateness;
medians keep one noisy step from naming a cause.
"""
from __future__ import annotations

from tracer import vocab as V
from viewer.analyses.recommendations import fmt_ns

MIN_EFFECT_NS = 1_000_000    # an excess under 1 ms per step is noise on a loaded host
MIN_EFFECT_OF_STEP = 0.03    # ... and so is one under 3 % of the step
MIN_SHARE = 0.25             # a phase names the cause when it explains a quarter of the lateness
PHASES = {"data_wait_ns": "data wait", "forward_ns": "forward", "backward_ns": "backward",
          "optimizer_ns": "optimizer step", "other_ns": "untraced time"}
ADVICE = {
    "data_wait_ns": "more loader workers (num_workers, prefetch), or check rank {r}'s storage and input pipeline",
    "forward_ns": "compute contention: check rank {r}'s CPU counters, other processes on its host or cores, "
                  "its GPU clocks, or uneven batches",
    "backward_ns": "compute contention: check rank {r}'s CPU counters, other processes on its host or cores, "
                   "its GPU clocks, or uneven batches",
    "optimizer_ns": "the update itself is slower: look for rank-specific work in step() (logging, clipping on "
                    "the CPU), or the same contention as compute",
    "other_ns": "time no phase covers: wrap rank {r}'s code between steps in hvd.timeline.region(...) "
                "(logging, checkpoints, evaluation)",
}
# counters differ when apart by at least this much and 15 % of the others' value
COUNTER_FLOOR = {V.COUNTER_CPU_PCT: 10.0, V.COUNTER_RSS_MB: 100.0, V.COUNTER_LOAD1: 0.5,
                 V.COUNTER_GPU_UTIL_PCT: 10.0, V.COUNTER_GPU_MEM_MB: 500.0}
COUNTER_UNITS = {V.COUNTER_CPU_PCT: "%", V.COUNTER_RSS_MB: "MiB", V.COUNTER_LOAD1: "",
                 V.COUNTER_GPU_UTIL_PCT: "%", V.COUNTER_GPU_MEM_MB: "MiB"}
COLUMNS = ["rank", "pct_last", "lateness_ns", "steps_compared", "phases_known", "cause", "explained_by", "excess_ns",
           "share_pct",
           *[p.replace("_ns", "_excess_ns") for p in PHASES], "counters", "message"]


def submit_lateness(neg):
    """Per rank and step: how much later the rank submitted its last tensor than the others' median.

    Args:
        neg: output of :func:`viewer.analyses.stragglers.negotiations`.
    Returns:
        DataFrame ``rank, step, lateness_ns`` (steps with a number only).
    """
    import pandas as pd

    if neg is None or not len(neg) or not (neg["step"] >= 0).any():
        return pd.DataFrame({"rank": pd.Series(dtype="int64"), "step": pd.Series(dtype="int64"),
                             "lateness_ns": pd.Series(dtype="float64")})
    last = neg[neg["step"] >= 0].groupby(["step", "rank"])["ready_ns"].max().unstack("rank")
    rows = []
    for r in last.columns:
        others = last.drop(columns=r).median(axis=1)
        rows.append(pd.DataFrame({"rank": int(r), "step": last.index.to_numpy(),
                                  "lateness_ns": (last[r] - others).to_numpy(dtype="float64")}))
    return pd.concat(rows, ignore_index=True).dropna()


def phase_excess(bd, rank: int):
    """Per phase bucket: the median over steps of ``rank``'s bucket minus the other ranks' median.

    Args:
        bd: output of :func:`viewer.analyses.breakdown.step_breakdown` (or ``phase_buckets``).
        rank: the rank to compare.
    Returns:
        ``({bucket: excess_ns}, steps_compared)``: steps where this rank and another one have phases.
    """
    bd = bd[(bd["step"] >= 0) & bd["phases_known"] & bd["other_ns"].notna()]
    mine = bd[bd["rank"] == rank].set_index("step")
    others = bd[bd["rank"] != rank]
    if not len(mine) or not len(others):
        return {}, 0
    med = others.groupby("step")[list(PHASES)].median()
    steps = mine.index.intersection(med.index)
    diff = mine.loc[steps, list(PHASES)].astype("float64") - med.loc[steps].astype("float64")
    return {p: float(diff[p].median()) for p in PHASES}, int(len(steps))


def counter_differences(events, rank: int):
    """The system counters on which ``rank`` differs from the others (medians over the samples in steps).

    Returns:
        list of ``{"counter", "rank_value", "others_value"}``, largest relative difference first.
    """
    ev = events[(events["ph"] == "C") & events["name"].isin(list(COUNTER_FLOOR))
                & (events["step"] >= 0)]
    if not len(ev):
        return []
    med = ev.groupby(["name", "rank"])["value"].median().unstack("rank")
    if rank not in med.columns or len(med.columns) < 2:
        return []
    out = []
    for name, row in med.iterrows():
        mine, others = row[rank], row.drop(rank).median()
        if mine != mine or others != others:
            continue
        gap = abs(mine - others)
        if gap >= COUNTER_FLOOR[name] and gap >= 0.15 * abs(others):
            out.append({"counter": str(name), "rank_value": float(mine), "others_value": float(others),
                        "_rel": gap / max(abs(others), 1e-9)})
    out.sort(key=lambda d: -d.pop("_rel"))
    return out


def _counters_text(diffs, rank: int) -> str:
    def v(d, key):
        unit = COUNTER_UNITS[d["counter"]]
        return f"{d[key]:.3g}" + (f" {unit}" if unit else "")

    return ", ".join(f"{d['counter']} {v(d, 'rank_value')} on rank {rank} vs {v(d, 'others_value')} on the others"
                     for d in diffs)


def root_causes(bd, neg, late, events):
    """For each rank flagged late, the phase that explains its lateness, by how much, and what to do.

    Args:
        bd: :func:`viewer.analyses.breakdown.step_breakdown`; neg: :func:`stragglers.negotiations`;
        late: :func:`stragglers.late_ranks`; events: the run's events table (for the counters).
    Returns:
        DataFrame ``COLUMNS``, one row per late rank: ``cause`` is the phase bucket that explains most
        (e.g. ``data_wait_ns``), ``"unexplained"`` when none does, ``"unknown"`` when the rank recorded
        no phases; ``explained_by``: every phase that passed, in words; ``excess_ns`` / ``share_pct``:
        the named phases' excess per step and its share of the lateness; ``<phase>_excess_ns`` each;
        ``counters``: the counters that differ (list of dicts); ``message``: the sentence for the findings.
    """
    import pandas as pd

    rows = []
    if late is None or not len(late):
        return pd.DataFrame(columns=COLUMNS)
    lateness = submit_lateness(neg)
    median_step = float(bd.loc[bd["step"] >= 0, "step_ns"].median()) if len(bd) else 0.0
    floor = max(MIN_EFFECT_NS, MIN_EFFECT_OF_STEP * (median_step if median_step == median_step else 0.0))
    for _, lr in late.iterrows():
        r = int(lr["rank"])
        mine = lateness[lateness["rank"] == r]["lateness_ns"]
        late_ns = float(mine.median()) if len(mine) else float(lr["median_lateness_ns"])
        known = bool(bd.loc[bd["rank"] == r, "phases_known"].any()) if len(bd) else False
        excess, n = phase_excess(bd, r) if known else ({}, 0)
        diffs = counter_differences(events, r)
        named = [p for p, v in sorted(excess.items(), key=lambda kv: -kv[1])
                 if p != "other_ns" and v >= floor and v >= MIN_SHARE * max(late_ns, 0.0)]
        total = sum(excess[p] for p in named)
        share = 100.0 * total / late_ns if late_ns > 0 else 0.0
        if not known:
            cause = "unknown"
            msg = (f"rank {r}'s phases are unknown (its trace has no {', '.join(V.PHASES)} spans: wrap the loader "
                   "with hvd.timeline.wrap_loader and the model with hvd.timeline.watch to see them)")
        elif not named:
            cause = "unexplained"
            msg = (f"no phase explains rank {r}'s lateness of {fmt_ns(late_ns)} per step (none is "
                   f"{fmt_ns(floor)} longer than the others' median)")
            if excess.get("other_ns", 0.0) >= floor:
                msg += (f"; its untraced time is {fmt_ns(excess['other_ns'])} longer: "
                        + ADVICE["other_ns"].format(r=r))
        else:
            cause = named[0]
            parts = [f"{PHASES[p]} is {fmt_ns(excess[p])}" for p in named]
            msg = (f"its {' and '.join(parts)} longer per step than the others' median "
                   f"({share:.0f} % of its lateness of {fmt_ns(late_ns)}): "
                   + "; ".join(dict.fromkeys(ADVICE[p].format(r=r) for p in named)))
        if diffs and cause != "data_wait_ns":
            msg += "; counters that differ: " + _counters_text(diffs, r)
        elif cause in ("unexplained", "unknown"):
            has = events["name"].isin(list(COUNTER_FLOOR)).any()
            msg += "; no system counter differs from the others'" if has else "; the trace has no system counters"
        rows.append({"rank": r, "pct_last": float(lr["pct_last"]), "lateness_ns": late_ns, "steps_compared": n,
                     "phases_known": known, "cause": cause,
                     "explained_by": ", ".join(PHASES[p] for p in named), "excess_ns": total if named else 0.0,
                     "share_pct": share if named else 0.0,
                     **{p.replace("_ns", "_excess_ns"): excess.get(p) for p in PHASES},
                     "counters": diffs, "message": msg})
    return pd.DataFrame(rows, columns=COLUMNS)
