"""Why a rank is late: each phase's median excess per step over the other ranks', and its counters."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from tracer import vocab as V
from viewer import units
from viewer import vocab as VOCAB
from viewer.analyses import cores

MIN_EFFECT_NS = 1_000_000    # an excess under 1 ms per step is noise on a loaded host
MIN_EFFECT_OF_STEP = 0.03    # ... and so is one under 3 % of the step
MIN_SHARE = 0.25             # a phase names the cause when it explains a quarter of the lateness
MIN_SHARE_MORE = 0.10        # ... and more phases join it from a tenth
IMBALANCE_OF_STEP = 0.05
IMBALANCE_RELATIVE = 0.5
IMBALANCE_STEPS = 0.75
PHASES = {b: VOCAB.BY_BUCKET[b].label for b in VOCAB.CAUSES}
ADVICE = {b: VOCAB.BY_BUCKET[b].advice for b in VOCAB.CAUSES}
# counters differ when apart by at least this much and 15 % of the others' value
COUNTER_FLOOR = {V.COUNTER_CPU_PCT: 10.0, V.COUNTER_RSS_MB: 100.0, V.COUNTER_LOAD1: 0.5,
                 V.COUNTER_GPU_UTIL_PCT: 10.0, V.COUNTER_GPU_MEM_MB: 500.0}
COUNTER_UNITS = {V.COUNTER_CPU_PCT: "%", V.COUNTER_RSS_MB: "MiB", V.COUNTER_LOAD1: "",
                 V.COUNTER_GPU_UTIL_PCT: "%", V.COUNTER_GPU_MEM_MB: "MiB"}
COLUMNS = ["rank", "late", "pct_last", "lateness_ns", "steps_compared", "phases_known", "cause", "explained_by",
           "excess_ns", "share_pct",
           *[p.replace("_ns", "_excess_ns") for p in PHASES], "counters", "message"]


def others_median(m):
    """Each cell's row median over the row's other cells (``m``: 2-D float, NaN missing and left out; NaN where
    no other value): pandas' figure for a row without that column, in one pass over all columns."""
    cnt = (~np.isnan(m)).sum(axis=1, keepdims=True)
    s = np.sort(m, axis=1)   # NaN last
    pos = np.empty(m.shape, dtype="int64")   # each cell's place in its sorted row (NaN: past the values)
    np.put_along_axis(pos, np.argsort(m, axis=1, kind="stable"), np.arange(m.shape[1])[None, :], axis=1)
    pos = np.minimum(pos, cnt)
    n = cnt - (pos < cnt)   # the others' values
    lo, hi = (n - 1) // 2, n // 2
    last = max(m.shape[1] - 1, 0)

    def nth(i):   # the i-th of the others' sorted values: past the cell's own place, one further
        return np.take_along_axis(s, np.clip(i + (i >= pos), 0, last), axis=1)

    with np.errstate(invalid="ignore"):
        return np.where(n > 0, np.where(n % 2 == 1, nth(lo), (nth(lo) + nth(hi)) / 2), np.nan)


def submit_lateness(neg):
    """Per rank and numbered step: how much later it submitted its last tensor than the others' median."""
    if neg is None or not len(neg) or not (neg["step"] >= 0).any():
        return pd.DataFrame({"rank": pd.Series(dtype="int64"), "step": pd.Series(dtype="int64"),
                             "lateness_ns": pd.Series(dtype="float64")})
    last = neg[neg["step"] >= 0].groupby(["step", "rank"])["ready_ns"].max().unstack("rank")
    m = last.astype("float64").to_numpy()
    late = m - others_median(m)
    return pd.DataFrame({"rank": np.repeat(last.columns.to_numpy(dtype="int64"), len(last)),
                         "step": np.tile(last.index.to_numpy(), len(last.columns)),
                         "lateness_ns": late.T.ravel()}).dropna()


def phase_excesses(bd) -> dict:
    """``{rank: (excess_ns, others_ns, steps_longer per bucket; steps compared)}`` against the other ranks'
    median, each step's (one row per rank and step, as the step breakdown has it); a rank with no step to
    compare is left out (see :func:`no_excess`)."""
    bd = bd[(bd["step"] >= 0) & bd["phases_known"] & bd["other_ns"].notna()]
    if not len(bd):
        return {}
    ranks, r_of = np.unique(bd["rank"].to_numpy(), return_inverse=True)
    steps, s_of = np.unique(bd["step"].to_numpy(), return_inverse=True)
    here = np.zeros((len(steps), len(ranks)), dtype=bool)
    here[s_of, r_of] = True
    compared = here & (here.sum(axis=1, keepdims=True) > 1)   # the rank's steps that others have too
    phases = list(PHASES)
    mine = np.full((len(phases), len(steps), len(ranks)), np.nan)
    for i, p in enumerate(phases):
        mine[i, s_of, r_of] = bd[p].astype("float64").to_numpy()
    theirs = np.stack([others_median(x) for x in mine])
    diff = mine - theirs
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # a bucket no step has a value of: NaN, as pandas'
        for j, r in enumerate(ranks):
            at = compared[:, j]
            n = int(at.sum())
            if not n:
                continue
            d, t = diff[:, at, j], theirs[:, at, j]
            out[int(r)] = (pd.DataFrame({"excess_ns": np.nanmedian(d, axis=1), "others_ns": np.nanmedian(t, axis=1),
                                         "steps_longer": (d > 0).sum(axis=1) / n}, index=phases), n)
    return out


def no_excess():
    """A rank's phase excess where no step compares: no bucket, 0 steps."""
    return pd.DataFrame(columns=["excess_ns", "others_ns", "steps_longer"], dtype="float64"), 0


def counter_differences(events, rank: int):
    """``[{counter, rank_value, others_value}]`` on which ``rank``'s median differs, the largest first."""
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


def counters_text(diffs) -> str:
    """The counters a rank differs on, as a table cell: "cpu_pct 95.3 vs 40.1, ..."."""
    return ", ".join(f"{c['counter']} {c['rank_value']:.3g} vs {c['others_value']:.3g}" for c in diffs or []) or "–"


def root_causes(bd, neg, late, events, strag=None, shared=None):
    """``COLUMNS`` per late rank, and per other rank with a phase far off: the phases that explain it.

    ``shared`` (:func:`viewer.analyses.cores.sharing`): ranks on CPUs shared by more ranks than CPUs, whose
    phases may run up to ``stretch`` times the others' from that alone; a late rank or a phase that core sharing
    explains is a ``core_sharing`` row (not late), not blamed on the rank."""
    median_step = float(bd.loc[bd["step"] >= 0, "step_ns"].median()) if len(bd) else 0.0
    median_step = median_step if median_step == median_step else 0.0
    floor = max(MIN_EFFECT_NS, MIN_EFFECT_OF_STEP * median_step)
    has_counters = bool(events["name"].isin(list(COUNTER_FLOOR)).any())
    lateness = submit_lateness(neg)
    excesses = phase_excesses(bd) if len(bd) else {}
    stretch = {} if shared is None or not len(shared) else dict(zip(shared["rank"].astype(int), shared["stretch"]))
    rows = []
    flagged = set()
    for _, lr in (late.iterrows() if late is not None else ()):
        r = int(lr["rank"])
        flagged.add(r)
        mine = lateness[lateness["rank"] == r]["lateness_ns"]
        late_ns = float(mine.median()) if len(mine) else float(lr["median_lateness_ns"])
        row = _late_row(bd, events, excesses, r, float(lr["pct_last"]), late_ns, floor, has_counters)
        if r in stretch and row["phases_known"] and row["steps_compared"]:
            row = _shared_late_row(excesses[r], row, stretch[r], floor, shared) or row
        rows.append(row)
    pct = {} if strag is None or not len(strag) else dict(zip(strag["rank"].astype(int), strag["pct_last"]))
    known = bd.loc[(bd["step"] >= 0) & bd["phases_known"], "rank"].unique().tolist() if len(bd) else []
    for r in sorted(set(int(k) for k in known) - flagged):
        row = _imbalance_row(events, excesses, r, float(pct.get(r, 0.0)), median_step, floor, stretch.get(r), shared)
        if row is not None:
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def beyond_sharing(ex, stretch: float | None):
    """Each phase's excess beyond what sharing CPUs explains: such a rank's phase may take up to ``stretch``
    times the others' median (:func:`viewer.analyses.cores.sharing`)."""
    return ex["excess_ns"] - (stretch - 1.0) * ex["others_ns"].clip(lower=0.0) if stretch else ex["excess_ns"]


def _sharing_note(r, stretch, shared) -> str:
    return (f"no more than core sharing explains ({cores.describe(shared, r)}: a phase can take up to {stretch:.3g}x "
            "as long as on another rank)")


def _shared_late_row(rank_ex, row, stretch, floor, shared):
    """A ``core_sharing`` row for a late rank none of whose phases is longer than core sharing explains, by
    ``floor`` in all (else None)."""
    ex, n = rank_ex
    if float(beyond_sharing(ex, stretch).clip(lower=0.0).sum()) >= floor:
        return None
    r = row["rank"]
    longer = [p for p in ex.sort_values("excess_ns", ascending=False).index if ex.loc[p, "excess_ns"] >= floor]
    excess = ex["excess_ns"].to_dict()
    what = (f"its {_parts(longer, excess)} longer per step than the others' median" if longer
            else "none of its phases is longer than the others' median by more than noise")
    msg = f"rank {r} was last in {row['pct_last']:.0f} % of negotiations and {what}, "
    msg += _sharing_note(r, stretch, shared)
    total = sum(excess[p] for p in longer)
    return {**row, "late": False, "cause": "core_sharing", "explained_by": ", ".join(PHASES[p] for p in longer),
            "excess_ns": float(total), "share_pct": 0.0, "message": msg}


def _late_row(bd, events, excesses, r, pct_last, late_ns, floor, has_counters):
    known = bool(bd.loc[bd["rank"] == r, "phases_known"].any()) if len(bd) else False
    ex, n = (excesses.get(r) or no_excess()) if known else (None, 0)
    excess = {} if ex is None else ex["excess_ns"].to_dict()
    diffs = counter_differences(events, r)
    order = [p for p, v in sorted(excess.items(), key=lambda kv: -kv[1]) if p != "other_ns" and v >= floor]
    # time no phase covers that grew more than any phase did is the cause, not that phase
    untraced = excess.get("other_ns", 0.0)
    outgrown = bool(order) and untraced >= floor and untraced > excess[order[0]]
    named = order[:1] if order and not outgrown and excess[order[0]] >= MIN_SHARE * max(late_ns, 0.0) else []
    named += [p for p in order[1:] if named and excess[p] >= MIN_SHARE_MORE * max(late_ns, 0.0)]
    total = sum(excess[p] for p in named)
    share = 100.0 * total / late_ns if late_ns > 0 else 0.0
    if not known:
        cause = "unknown"
        spans = ", ".join(p.span for p in VOCAB.FRAMEWORK)
        msg = (f"rank {r}'s phases are unknown (its trace has no {spans} spans: wrap the loader "
               "with hvd.timeline.wrap_loader and the model with hvd.timeline.watch to see them): look at what "
               f"rank {r} does before it submits (data loading, host load, a slower device or extra work)")
    elif not named:
        cause = "unexplained"
        msg = (f"no phase explains rank {r}'s lateness of {units.duration(late_ns)} per step (none is "
               f"{units.duration(floor)} and a quarter of it longer than the others' median"
               f"{', nor grew as much as its untraced time' if outgrown else ''})")
        if untraced >= floor:
            msg += (f"; its untraced time is {units.duration(excess['other_ns'])} longer: "
                    + ADVICE["other_ns"].format(r=r))
    else:
        cause = named[0]
        of = (f"{share:.0f} % of its lateness of {units.duration(late_ns)}" if share <= 120 else
              f"more than its whole lateness of {units.duration(late_ns)}: its other phases were shorter")
        msg = f"its {_parts(named, excess)} longer per step than the others' median ({of}): " + _advice(named, r)
    if diffs and cause != "data_wait_ns":
        msg += "; counters that differ: " + _counters_text(diffs, r)
    elif cause in ("unexplained", "unknown"):
        msg += "; no system counter differs from the others'" if has_counters else "; the trace has no system counters"
    return _row(r, True, pct_last, late_ns, n, known, cause, named, total, share if named else 0.0, excess, diffs,
                msg)


def _imbalance_row(events, excesses, r, pct_last, median_step, floor, stretch=None, shared=None):
    """A row for a rank not flagged late whose phase is far off, else None (``core_sharing`` when every such
    phase is within what its ``stretch`` from sharing CPUs explains)."""
    ex, n = excesses.get(r) or no_excess()
    if not n:
        return None

    # arrays, not Series: this runs once per rank (1,023 times at 1,024 ranks)
    phase, others = ex.index.to_numpy() != "other_ns", ex["others_ns"].to_numpy()
    often = ex["steps_longer"].to_numpy() >= IMBALANCE_STEPS
    least = max(floor, IMBALANCE_OF_STEP * median_step)

    def far_off(excess):
        excess = np.asarray(excess, dtype="float64")
        return phase & (excess >= least) & (excess >= IMBALANCE_RELATIVE * others) & often

    far = ex[far_off(ex["excess_ns"])]
    if not len(far):
        return None
    own = ex[far_off(beyond_sharing(ex, stretch))]
    named = (own if len(own) else far).sort_values("excess_ns", ascending=False).index.tolist()
    excess = ex["excess_ns"].to_dict()
    total = sum(excess[p] for p in named)
    share = 100.0 * total / median_step if median_step else 0.0
    longer = int(round(float(ex.loc[named[0], "steps_longer"]) * n))
    if not len(own):
        msg = (f"rank {r}'s {_parts(named, excess)} longer per step than the others' median (in {longer} of {n} "
               f"steps, {share:.0f} % of the step), {_sharing_note(r, stretch, shared)}")
        return _row(r, False, pct_last, 0.0, n, True, "core_sharing", named, total, share, excess, [], msg)
    diffs = counter_differences(events, r)
    msg = (f"rank {r}'s {_parts(named, excess)} longer per step than the others' median (in {longer} of {n} steps, "
           f"{share:.0f} % of the step), though it was last in only {pct_last:.0f} % of negotiations (noise "
           f"elsewhere hides it): " + _advice(named, r))
    if diffs and named[0] != "data_wait_ns":
        msg += "; counters that differ: " + _counters_text(diffs, r)
    return _row(r, False, pct_last, 0.0, n, True, named[0], named, total, share, excess, diffs, msg)


def _parts(named, excess) -> str:
    return " and ".join(f"{PHASES[p]} is {units.duration(excess[p])}" for p in named)


def _advice(named, r) -> str:
    return "; ".join(dict.fromkeys(ADVICE[p].format(r=r) for p in named))


def _row(r, late, pct_last, late_ns, n, known, cause, named, total, share, excess, diffs, msg) -> dict:
    return {"rank": r, "late": late, "pct_last": pct_last, "lateness_ns": late_ns, "steps_compared": n,
            "phases_known": known, "cause": cause, "explained_by": ", ".join(PHASES[p] for p in named),
            "excess_ns": float(total), "share_pct": float(share),
            **{p.replace("_ns", "_excess_ns"): excess.get(p) for p in PHASES}, "counters": diffs, "message": msg}
