"""The machines the two runs ran on, from the tracer's system counters: a caution when they differed, since a
per-step test cannot tell a busier machine from slower code."""
from __future__ import annotations

from tracer import vocab as V

CPU_SHIFT = 0.2    # the ranks' CPU share, relative: more than this and the machine differed
LOAD_SHIFT = 0.5   # the host's 1-minute load, relative (the ranks' own load is in it)


def machine(run, steps) -> dict | None:
    """Mean over the steady steps of the ranks' ``cpu_pct`` (% of one core) and the hosts' ``load1``; None
    when the trace has no system counters (older traces, Kineto, Horovod)."""
    ev = run.events
    sel = ((ev["ph"] == "C") & ev["name"].isin([V.COUNTER_CPU_PCT, V.COUNTER_LOAD1])).to_numpy(dtype=bool,
                                                                                                na_value=False)
    c = ev.loc[sel, ["name", "step", "value"]]
    if len(steps) and c["step"].isin(steps).any():
        c = c[c["step"].isin(steps)]
    if not len(c):
        return None
    means = c.groupby(c["name"].astype(str))["value"].mean()
    return {"cpu_pct": float(means[V.COUNTER_CPU_PCT]) if V.COUNTER_CPU_PCT in means else None,
            "load1": float(means[V.COUNTER_LOAD1]) if V.COUNTER_LOAD1 in means else None}


def _shift(a, b) -> float | None:
    return None if a is None or b is None or a <= 0 else abs(b - a) / a


def cautions(a: dict | None, b: dict | None) -> list[str]:
    """A sentence when the ranks' CPU share or the host's load differed between the runs."""
    if a is None or b is None:
        return []
    parts = []
    if (s := _shift(a["cpu_pct"], b["cpu_pct"])) is not None and s > CPU_SHIFT:
        parts.append(f"the ranks' CPU share {a['cpu_pct']:.1f} % → {b['cpu_pct']:.1f} % of a core")
    if (s := _shift(a["load1"], b["load1"])) is not None and s > LOAD_SHIFT:
        parts.append(f"the host's 1-minute load {a['load1']:.1f} → {b['load1']:.1f}")
    if not parts:
        return []
    return [f"The machine differed between the runs ({'; '.join(parts)}): part of the change may be the "
            "machine's, not the run's (the test sees the noise within each run, not a busier machine)."]
