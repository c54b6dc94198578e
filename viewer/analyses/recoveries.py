"""Recoveries of an elastic run (docs/ELASTIC.md): what each reset of the world cost."""
from __future__ import annotations

from tracer import vocab as V

COLUMNS = ["reset", "generation_before", "generation_after", "kind", "cause", "lost", "added", "size_before",
           "size_after", "last_commit_step", "failed_ns", "detected_ns", "relaunched_ns", "reformed_ns",
           "restored_ns", "first_step_end_ns", "detect_ms", "reform_ms", "restore_ms", "first_step_ms", "lost_ms",
           "redone_ms", "cost_ms", "share_pct", "biggest", "ranks_with_slice", "ranks_missing_slice"]
# the parts of a reset's cost, in time order: (column, what the finding calls it)
PARTS = [("redone_ms", "work redone"), ("detect_ms", "detection"), ("reform_ms", "re-forming the world"),
         ("restore_ms", "restoring the state"), ("first_step_ms", "the first step after")]
SHARE_FINDING_PCT = 5.0
_TIMES = ("detected", "relaunched", "reformed", "restored", "first_step_end")


def _ms(a, b):
    return None if a is None or b is None else (b - a) / 1e6


def recoveries(tables):
    """``COLUMNS`` per reset: ``cost_ms`` = lost (failure -> first step after) + redone (commit -> failure)."""
    import pandas as pd  # here, not above: `ringscope merge` reads PARTS without pandas

    meta = tables.meta
    el = meta.get("elastic")
    if not el or not el.get("resets"):
        return pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})
    origin = meta.get("origin_epoch_ns") or 0
    ev = tables.events
    el_ev = ev[(ev["cat"] == V.CAT_ELASTIC).to_numpy(dtype=bool, na_value=False)]
    ranks = tables.ranks
    gens = el["generations"]   # the job: the first generation's start to the last one's end (else the last event's)
    start, end = gens[0]["start_ns"], gens[-1]["end_ns"]
    end = end if end is not None else int((ev["t_ns"] + ev["dur_ns"]).max()) if len(ev) else start
    wall = max(int(end) - int(start), 1)
    resets = el["resets"]
    rows = []
    for i, r in enumerate(resets):
        t = {k: None if r.get(f"{k}_epoch_ns") is None else r[f"{k}_epoch_ns"] - origin
             for k in ("last_commit", "failed", *_TIMES)}
        until = resets[i + 1]["failed_epoch_ns"] - origin if i + 1 < len(resets) else None
        window = (el_ev["t_ns"] >= t["failed"]) & (True if until is None else el_ev["t_ns"] < until)
        mine = el_ev[window.to_numpy(dtype=bool)]
        slices = mine[mine["name"] == V.ELASTIC_RESET]
        g = r["generation_after"]
        world = sorted(int(x) for x in ranks.loc[ranks["generation"] == g, "rank"])
        have = sorted(set(int(x) for x in slices["rank"]) & set(world))
        if t["restored"] is None:
            restores = mine[mine["name"] == V.ELASTIC_RESTORE]
            t["restored"] = int((restores["t_ns"] + restores["dur_ns"]).max()) if len(restores) else None
        if t["first_step_end"] is None and len(slices):
            t["first_step_end"] = int((slices["t_ns"] + slices["dur_ns"]).max())
        row = {
            "reset": i, "generation_before": r["generation_before"], "generation_after": g, "kind": r["kind"],
            "cause": r.get("cause") or "", "lost": _who(r.get("lost")), "added": _who(r.get("added")),
            "size_before": r.get("size_before"), "size_after": r.get("size_after"),
            "last_commit_step": r.get("last_commit_step"),
            **{f"{k}_ns": t[k] for k in ("failed", *_TIMES)},
            "detect_ms": _ms(t["failed"], t["detected"]), "reform_ms": _ms(t["detected"], t["reformed"]),
            "restore_ms": _ms(t["reformed"], t["restored"]), "first_step_ms": _ms(t["restored"], t["first_step_end"]),
            "lost_ms": _ms(t["failed"], t["first_step_end"]),
            "redone_ms": 0.0 if r["kind"] == "added" and t["last_commit"] is None
            else _ms(t["last_commit"], t["failed"]),
            "ranks_with_slice": have, "ranks_missing_slice": [x for x in world if x not in have],
        }
        parts = {c: row[c] for c, _ in PARTS if row[c] is not None}
        row["cost_ms"] = (row["lost_ms"] or 0.0) + (row["redone_ms"] or 0.0)
        row["share_pct"] = 100.0 * row["cost_ms"] * 1e6 / wall
        row["biggest"] = dict(PARTS)[max(parts, key=parts.get)] if parts else None
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def _who(items) -> str:
    """``rank 2 (localhost, pid 4321)`` / ``h2 (1 slot)``, comma-separated."""
    out = []
    for x in items or []:
        if not isinstance(x, dict):
            out.append(str(x))
        elif "rank" in x:
            out.append(f"rank {x['rank']}" + (f" ({x.get('host')}, pid {x.get('pid')})" if x.get("host") else ""))
        else:
            out.append(f"{x.get('host')} ({x.get('slots', '?')} slot(s))")
    return ", ".join(out)
