"""A finding rule declares the runs it fits (``viewer.registry.NEEDS``) and gives finding rows."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from viewer.registry import NEEDS

COLUMNS = ["kind", "severity", "score", "title", "message", "evidence"]
JSON_COLUMNS = ["kind", "severity", "title", "message", "evidence"]


@dataclass(frozen=True)
class Rule:
    fn: Callable[..., list[dict]]   # (run, peak_busbw_gbps) -> rows
    needs: frozenset[str]
    unless: frozenset[str] = frozenset()   # runs that have any of these get none (advice not theirs)


RULES: list[Rule] = []


def rule(*needs: str, unless: tuple[str, ...] = ()):
    """Declare ``f(run, peak_busbw_gbps)`` a finding rule for runs that have ``needs`` and none of ``unless``."""
    if set(needs + unless) - set(NEEDS):
        raise ValueError(f"unknown needs: {set(needs + unless) - set(NEEDS)}")

    def declare(fn):
        RULES.append(Rule(fn, frozenset(needs), frozenset(unless)))
        return fn
    return declare


def finding(kind: str, severity: str, score, title: str, message: str, *, ranks=(), steps=(), window=None,
            metric: str | None = None, value=None, unit: str | None = None) -> dict:
    """One finding row; ``window``: (t0_ns, t1_ns) on the run's axis where the timeline shows it."""
    evidence = {"ranks": sorted({int(r) for r in ranks}),
                "steps": sorted({int(s) for s in steps if s is not None and s >= 0}),
                "window_ns": None if window is None else [int(window[0]), int(window[1])],
                "metric": metric, "value": None if value is None else float(value), "unit": unit}
    return {"kind": kind, "severity": severity, "score": float(score), "title": title, "message": message,
            "evidence": evidence}


def step_window(run, step, ranks=None) -> tuple[int, int] | None:
    """The span of ``step`` (on ``ranks`` when they ran it, else on every rank), or None."""
    if step is None or step < 0:
        return None
    st = run.step_times()
    sel = st[st["step"] == step]
    if ranks is not None and sel["rank"].isin(list(ranks)).any():
        sel = sel[sel["rank"].isin(list(ranks))]
    return (int(sel["start_ns"].min()), int(sel["end_ns"].max())) if len(sel) else None


def optional(run, name: str):
    """``run.<name>()``, or None when the run cannot give it."""
    return getattr(run, name)() if run.why_not(name) is None else None


def at_worst_step(run, rows: list[dict], neg) -> list[dict]:
    """``rows`` with the step (and its window) in which their ranks, last in ``neg``, held the others up most."""
    for row in rows:
        ranks = row["evidence"]["ranks"]
        mine = () if neg is None else neg[neg["is_last"].astype(bool) & neg["rank"].isin(ranks) & (neg["step"] >= 0)]
        step = int(mine.groupby("step")["wait_imposed_ns"].sum().idxmax()) if len(mine) else None
        row["evidence"].update(steps=[] if step is None else [step], window_ns=step_window(run, step, ranks))
    return rows


def most_exposed(run, at_least: float = 20.0):
    """(share %, rank, its breakdown row, its most exposed step) on the rank whose step is most exposed
    communication, when that share is ``at_least`` % or more; else None."""
    by_rank = run.breakdown()
    by_rank = by_rank[by_rank["exposed_comm_ns"].notna() & (by_rank["step_ns"] > 0)]
    if not len(by_rank):
        return None
    share = 100.0 * by_rank["exposed_comm_ns"].astype("float64") / by_rank["step_ns"]
    row = by_rank.loc[share.idxmax()]
    pct, rank = float(share.max()), int(row["rank"])
    if pct < at_least:
        return None
    steps = run.breakdown_steps()
    mine = steps[(steps["rank"] == rank) & (steps["step"] >= 0) & steps["exposed_comm_ns"].notna()]
    step = int(mine.loc[mine["exposed_comm_ns"].astype("float64").idxmax(), "step"]) if len(mine) else None
    return pct, rank, row, step
