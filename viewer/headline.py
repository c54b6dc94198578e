"""The headline of a run: its figures and a one-sentence verdict, which the summary, the dashboard, the what-if
and the CLI read (none computes its own)."""
from __future__ import annotations

import pandas as pd

from tracer import vocab as V
from viewer import units
from viewer.analyses.communication import credible
from viewer.kineto.kernels import step_spans as profiler_steps

STEP_COLUMNS = ["rank", "step", "start_ns", "end_ns", "dur_ns"]


def step_times(tables) -> pd.DataFrame:
    """Per rank and step: its span, from STEP spans, else ProfilerStep#N, else the step's ops."""
    ev = tables.events_without_ops
    sel = ((ev["name"] == V.STEP) & (ev["ph"] == "X")).to_numpy(dtype=bool, na_value=False)
    if sel.any():
        x = ev.loc[sel, ["rank", "step", "t_ns", "dur_ns"]]
        df = x.assign(end_ns=x["t_ns"] + x["dur_ns"]).groupby(["rank", "step"], as_index=False).agg(
            start_ns=("t_ns", "min"), end_ns=("end_ns", "max"), dur_ns=("dur_ns", "sum"))
    elif "launch_ns" in ev.columns and len(ps := profiler_steps(ev)):
        df = ps.assign(dur_ns=ps["end_ns"] - ps["start_ns"])
    else:
        ops = tables.tensor_ops
        done = ops["done_ns"].fillna(ops["start_ns"]).fillna(ops["negotiated_ns"]).fillna(ops["submit_ns"])
        g = ops.assign(done=done.astype("int64")).groupby(["rank", "step"])
        df = pd.DataFrame({"start_ns": g["submit_ns"].min(), "end_ns": g["done"].max()}).reset_index()
        df["dur_ns"] = df["end_ns"] - df["start_ns"]
    df = df[df["step"] >= 0].astype("int64")
    return df[STEP_COLUMNS].sort_values(["step", "rank"], ignore_index=True)


def median_step_ns(st: pd.DataFrame) -> float | None:
    """The run's step time: per step, the mean over ranks of each rank's step; the median over steps."""
    per_step = st.groupby("step")["dur_ns"].mean()
    return float(per_step.median()) if len(per_step) else None


def _exposed_pct(run) -> float | None:
    """The share of the step the framework waited on communication (SYNCHRONIZE, else exposed NCCL kernels)."""
    for name in ("breakdown_steps", "kineto_steps"):
        if run.why_not(name) is None:
            d = run.get(name)
            d = d[(d["step"] >= 0) & d["exposed_comm_ns"].notna()]
            total = float(d["step_ns"].sum())
            if total > 0:
                return 100.0 * float(d["exposed_comm_ns"].astype("float64").sum()) / total
    return None


def _alpha_beta(run) -> tuple[float | None, float | None]:
    """α (µs) and β (GB/s) of the allreduce with the most ops, when its fit is credible."""
    if run.why_not("alpha_beta"):
        return None, None
    ab = credible(run.alpha_beta())
    ab = ab[ab["op"] == "ALLREDUCE"]
    if not len(ab):
        return None, None
    row = ab.sort_values("ops", ascending=False).iloc[0]
    return float(row["alpha_us"]), float(row["beta_gbps"])


def _busbw(run, peak) -> tuple[float | None, float | None]:
    """The median busbw of the biggest quarter of messages of the busiest op: (GB/s, % of ``peak`` or the best)."""
    if run.why_not("op_bandwidth"):
        return None, None
    bw = run.op_bandwidth(peak)
    bw = bw[bw["bytes"] > 0]
    if not len(bw):
        return None, None
    mine = bw[bw["op"] == bw.groupby("op")["bytes"].sum().idxmax()]
    big = float(mine.loc[mine["bytes"] >= mine["bytes"].quantile(0.75), "busbw_gbps"].median())
    best = peak or float(mine["busbw_gbps"].max())
    return big, (100.0 * big / best if best else None)


def headline(run, peak_busbw_gbps=None) -> dict:
    """The headline figures and the verdict (docs/SUMMARY_JSON.md, ``headline``)."""
    st = run.step_times()
    step = median_step_ns(st)
    late = run.late_ranks() if run.why_not("late_ranks") is None else None
    hosts = run.late_hosts() if run.why_not("late_hosts") is None else None
    alpha, beta = _alpha_beta(run)
    busbw, eff = _busbw(run, peak_busbw_gbps)
    fus = run.fusion() if run.why_not("fusion") is None else None
    rows, first, last = run.tables.events_extent
    out = {
        "step_ms": None if step is None else step / 1e6, "steps": int(st["step"].nunique()), "ranks": run.size,
        "ranks_loaded": int(run.ranks["rank"].nunique()),
        "duration_ms": float(last - first) / 1e6 if rows else 0.0,
        "exposed_comm_pct": _exposed_pct(run),
        "late_rank": int(late["rank"].iloc[0]) if late is not None and len(late) else None,
        "late_host": str(hosts["host"].iloc[0]) if hosts is not None and len(hosts) else None,
        "alpha_us": alpha, "beta_gbps": beta,
        "memcpy_pct": 100.0 * float(fus["memcpy_share"].iloc[0]) if fus is not None and len(fus) else None,
        "busbw_gbps": busbw, "busbw_pct": eff,
    }
    out["verdict"] = verdict(out, run.findings(peak_busbw_gbps))
    return out


def verdict(h: dict, found: pd.DataFrame) -> str:
    """One sentence: the most important severe finding, else that the run looks healthy and what to look at."""
    high = found[found["severity"] == "high"]
    if len(high):
        return _sentence(high["title"].iloc[0])
    parts = []
    if h["step_ms"] is not None:
        parts.append(f"{units.duration(h['step_ms'] * 1e6)} a step")
    if h["exposed_comm_pct"] is not None:
        parts.append(f"{units.pct(h['exposed_comm_pct'])} of it exposed communication")
    if h["late_rank"] is None and h["ranks_loaded"] > 1:
        parts.append("no rank late")
    medium = found[found["severity"] == "medium"]
    look = f"; worth a look: {medium['title'].iloc[0]}" if len(medium) else ""
    return _sentence("This run looks healthy" + (": " + ", ".join(parts) if parts else "") + look)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
