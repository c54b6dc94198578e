"""The machines the two runs ran on, from the tracer's system counters: a caution when they differed, since a
per-step test cannot tell a busier machine from slower code."""
from __future__ import annotations

from tracer import vocab as V
from viewer.summary import hosts

OTHERS_SHIFT = 1.0   # cores: other processes' load moved by a core or more and the machine differed


def machine(run, steps) -> dict | None:
    """Mean over the steady steps of the ranks' ``cpu_pct`` (% of one core), the hosts' ``load1``, and
    ``others_load``: the load beside the ranks' own (load1 less the cores the host's ranks used); None
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
    cpu = float(means[V.COUNTER_CPU_PCT]) if V.COUNTER_CPU_PCT in means else None
    load = float(means[V.COUNTER_LOAD1]) if V.COUNTER_LOAD1 in means else None
    per_host = run.size / max(1, len(hosts(run.ranks)))
    return {"cpu_pct": cpu, "load1": load,
            "others_load": None if cpu is None or load is None else load - per_host * cpu / 100}


def cautions(a: dict | None, b: dict | None, between_runs: bool = False) -> list[str]:
    """A sentence when other processes loaded the machine differently in the two runs (the ranks' own CPU
    share is the run's: it drops when they wait more, on a slower link say); ``between_runs``: the test
    saw the spread between several runs a side, which a machine busier on one side only still escapes."""
    if a is None or b is None or a["others_load"] is None or b["others_load"] is None:
        return []
    if abs(b["others_load"] - a["others_load"]) < OTHERS_SHIFT:
        return []
    return [f"The machine differed between the runs (other processes' load beside the ranks' "
            f"{a['others_load']:.1f} → {b['others_load']:.1f} cores): part of the change may be the machine's, "
            "not the run's " + ("(the test sees the spread between each side's runs, not a machine busier on one "
                                "side)." if between_runs else "(the test sees the noise within each run, not a "
                                "busier machine).")]
