"""The finding about an elastic run: what its resets of the world cost, and what to do about it."""
from __future__ import annotations

from viewer import units
from viewer.analyses.recoveries import PARTS, SHARE_FINDING_PCT
from viewer.findings.rule import finding, rule

_ADVICE = {
    "work redone": "commit more often (state.commit() every fewer steps, or when a step ends after a time "
                   "budget), since everything after the last commit is run again",
    "detection": "the driver was slow to act: a rank that hangs instead of exiting is only seen once its "
                 "control connection closes, so make a stuck rank exit (a stall timeout); for an added host, "
                 "the old world must first leave after its commit, so keep its shutdown short",
    "re-forming the world": "the new world took long to start and register: keep the script's start-up before "
                            "hvd.init() light (imports, data set opening) and the launch close to the hosts",
    "restoring the state": "commit and restore less state (the model and optimizer, not data caches), or "
                           "restore from a faster place",
    "the first step after": "the first step after the restore ran long (warm-up: allocation, caches, "
                            "compilation): warm up before the restore or keep the world's processes alive",
}


@rule("elastic")
def recoveries(run, peak=None) -> list[dict]:
    """The recoveries when they cost over SHARE_FINDING_PCT of the job: their biggest part and its fix."""
    rec = run.recoveries()
    if not len(rec):
        return []
    share = float(rec["share_pct"].sum())
    if share <= SHARE_FINDING_PCT:
        return []
    totals = {name: float(rec[c].fillna(0).sum()) for c, name in PARTS}
    biggest = max(totals, key=totals.get)
    cost = float(rec["cost_ms"].sum()) * 1e6
    kinds = ", ".join(f"{n} {k}" for k, n in rec["kind"].value_counts().sort_index().items())
    worst = rec.sort_values("cost_ms", ascending=False).iloc[0]
    msg = (f"{len(rec)} recover{'y' if len(rec) == 1 else 'ies'} ({kinds}) cost {units.duration(cost)}, "
           f"{share:.0f} % of the job; the biggest part was {biggest} ({units.duration(totals[biggest] * 1e6)} in "
           f"all; the costliest reset followed: {worst['cause']}): " + _ADVICE[biggest])
    return [finding("recoveries", "high" if share >= 20 else "medium", 40 + min(share, 50),
                    f"elastic recoveries cost {share:.0f} % of the job", msg, ranks=worst["ranks_with_slice"] or (),
                    window=(worst["failed_ns"], worst["first_step_end_ns"]) if worst["failed_ns"] == worst["failed_ns"]
                    and worst["first_step_end_ns"] == worst["first_step_end_ns"] else None,
                    metric="share_pct", value=share, unit="pct")]
