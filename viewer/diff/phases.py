"""Where the step change went, by phase: each run's mean per phase over its steady steps, A to B."""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracer import vocab as V
from viewer import vocab
from viewer.analyses import intervals

# exposed communication while some of the rank's ops were still negotiating: waiting on the other ranks
NEGOTIATION = "exposed_negotiation_ns"
EXPOSED = vocab.BY_BUCKET["exposed_comm_ns"]


def _labels() -> list[tuple[str, str]]:
    """(bucket, label) in the order a step runs them; exposed communication split, negotiation first."""
    out = []
    for p in vocab.PHASES:
        if p.bucket == EXPOSED.bucket:
            out.append((NEGOTIATION, "negotiation"))
        out.append((p.bucket, p.label))
    return out


PHASES = _labels()


def exposed_negotiation(run, steps) -> pd.DataFrame:
    """Per rank and step of ``steps``: the time inside SYNCHRONIZE while one of the rank's ops negotiated."""
    ev = run.events
    sel = ((ev["thread"] == "framework") & (ev["ph"] == "X")
           & ev["name"].isin([V.STEP, V.SYNCHRONIZE])).to_numpy(dtype=bool, na_value=False)
    fw = ev.loc[sel, ["rank", "name", "t_ns", "dur_ns", "step"]]
    ops = run.tensor_ops
    rows = []
    for rank, mine in fw.groupby("rank"):
        st = mine[(mine["name"] == V.STEP).to_numpy() & mine["step"].isin(steps).to_numpy()]
        if not len(st):
            continue
        sy = mine[(mine["name"] == V.SYNCHRONIZE).to_numpy()]
        o = ops[ops["rank"] == rank]
        neg_end = o["negotiated_ns"].fillna(o["done_ns"]).fillna(o["submit_ns"]).astype("int64")
        both = intervals.intersection(zip(sy["t_ns"].tolist(), (sy["t_ns"] + sy["dur_ns"]).tolist()),
                                      zip(o["submit_ns"].tolist(), neg_end.tolist()))
        s0 = st["t_ns"].to_numpy(dtype="int64")
        s1 = s0 + st["dur_ns"].to_numpy(dtype="int64")
        got = intervals.covered_before(both, s1) - intervals.covered_before(both, s0)
        rows += [(int(rank), int(s), int(g)) for s, g in zip(st["step"], got)]
    return pd.DataFrame(rows, columns=["rank", "step", NEGOTIATION])


def run_phases(run, steps) -> dict | None:
    """Mean per step (ns) of each phase over ``steps`` and the ranks, with ``step_ns``; None without phases.

    A phase no rank of the run recorded is left out (unknown, never guessed)."""
    if run.why_not("breakdown_steps") is None:
        bd = run.breakdown_steps()
        bd = bd[bd["step"].isin(steps) & bd["other_ns"].notna()]
        if not len(bd):
            return None
        neg = exposed_negotiation(run, steps)
        bd = bd.merge(neg, on=["rank", "step"], how="left")
        bd[NEGOTIATION] = bd[NEGOTIATION].fillna(0).astype("float64")
        bd[EXPOSED.bucket] = bd[EXPOSED.bucket].astype("float64") - bd[NEGOTIATION]
        out = {"step_ns": float(bd["step_ns"].mean())}
        for bucket, _ in PHASES:
            col = bd[bucket].astype("float64")
            if col.notna().any():
                out[bucket] = float(col.fillna(0).mean())
        return out
    if run.why_not("kineto_steps") is None:   # the GPU's exposed communication; the rest untraced
        ks = run.kineto_steps()
        ks = ks[ks["step"].isin(steps)]
        if not len(ks):
            return None
        step = float(ks["step_ns"].mean())
        exposed = float(ks["exposed_comm_ns"].astype("float64").fillna(0).mean())
        return {"step_ns": step, EXPOSED.bucket: exposed, "other_ns": step - exposed}
    return None


def fold_unknown(mine: dict, theirs: dict) -> dict:
    """``mine`` with the phases ``theirs`` lacks counted in other (as they are there), so others compare."""
    lost = [k for k in mine if k not in theirs]
    kept = {k: v for k, v in mine.items() if k not in lost}
    return kept | {"other_ns": mine["other_ns"] + sum(mine[k] for k in lost)}


def phase_changes(a: dict | None, b: dict | None, change_ms: float | None) -> dict:
    """``phases``: ``{phase, label, a_ms, b_ms, delta_ms}`` of the phases both runs know, ``other`` last as
    the remainder so the deltas sum to ``change_ms``; ``residual_ms``: that remainder less other's measured
    change (what the measured phases miss); ``unknown``: the phases one run lacks."""
    if a is None or b is None or change_ms is None:
        return {"phases": [], "residual_ms": None, "unknown": [label for _, label in PHASES]}
    rows, unknown = [], []
    a, b = fold_unknown(a, b), fold_unknown(b, a)
    for bucket, label in PHASES:
        name = label.replace("untraced time", "other")
        if bucket not in a or bucket not in b:
            unknown.append(name)
            continue
        rows.append({"phase": name, "a_ms": a[bucket] / 1e6, "b_ms": b[bucket] / 1e6,
                     "delta_ms": (b[bucket] - a[bucket]) / 1e6})
    other = rows.pop()   # "other" is always known: the time no phase covers
    known = float(np.sum([r["delta_ms"] for r in rows]))
    remainder = change_ms - known
    rows.append({**other, "delta_ms": remainder})
    return {"phases": rows, "residual_ms": remainder - other["delta_ms"], "unknown": unknown}
