"""Results of a replay: measured, baseline and predicted step times, and drawable timelines."""
from __future__ import annotations

import statistics
from dataclasses import asdict
from typing import TYPE_CHECKING

import pandas as pd

from viewer.whatif import rebuild, replay
from viewer.whatif.replay import Model, Settings

if TYPE_CHECKING:
    from viewer.run import Run

# the run's headline figures a what-if shows beside its own (docs/SUMMARY_JSON.md, ``headline``)
HEADLINE = ("step_ms", "alpha_us", "beta_gbps")


class ModelError(ValueError):
    """The run has nothing the replay can use (one line, for the CLI)."""


def fit(run: Run) -> Model:
    """The model fitted on the run's rebuilt steps (:class:`ModelError`: none); its headline beside it."""
    if "ddp" in run.has:
        raise ModelError("a DDP job's trace: the replay models the runtime's fusion threshold and cycle time, "
                         "which DDP does not have (its buckets follow bucket_cap_mb; summarize gives the DDP findings)")
    tables = run.tables
    steps = rebuild.rebuild(tables)
    if not steps:
        raise ModelError("no complete step to replay (every rank's STEP span with all its "
                         "collectives finished, or for a Horovod timeline a complete occurrence "
                         "of its tensors)")
    if not tables.fused_ops["response"].size:
        raise ModelError("no collectives to fit the communication cost on")
    model = replay.fit_model(tables, steps)
    h = run.headline()
    model.headline = {k: h[k] for k in HEADLINE}
    return model


def predict(run_or_model: Run | Model, settings: Settings) -> dict:
    """Measured, baseline and predicted step times (ms) per step and overall, the fits, and a ``timeline``."""
    model = run_or_model if isinstance(run_or_model, Model) else fit(run_or_model)
    base = [replay.replay_step(model, Settings(), s) for s in model.steps]
    pred = [replay.replay_step(model, settings, s) for s in model.steps]
    rows = [{"step": b["step"], "measured_ms": b["measured_ns"] / 1e6, "baseline_ms": b["predicted_ns"] / 1e6,
             "predicted_ms": p["predicted_ns"] / 1e6} for b, p in zip(base, pred)]
    out = {
        "measured_step_ms": model.headline.get("step_ms"),
        "baseline_step_ms": statistics.median(r["baseline_ms"] for r in rows),
        "predicted_step_ms": statistics.median(r["predicted_ms"] for r in rows),
        "baseline_error_pct": 100 * max(abs(r["baseline_ms"] - r["measured_ms"]) / r["measured_ms"] for r in rows),
        "steps": rows, "settings": asdict(model.effective(settings)),
        "run_settings": {"fusion_threshold": model.fusion_threshold, "cycle_time_ms": model.cycle_time_ms,
                         "ranks": model.size, "assumed": list(model.assumed)},
        "fits": [f.row() for f in model.fits.values()],
        "alpha_us": model.headline.get("alpha_us"), "beta_gbps": model.headline.get("beta_gbps"),
        "dispatch_latency_ms": model.latency_ns.get("coordinator", 0.0) / 1e6,
        "extrapolated": bool(settings.ranks and settings.ranks != model.size),
    }
    if model.steps:
        out["timeline"] = timeline(model, settings, model.steps[0], pred[0])
    return out


def step_ms(model: Model, settings: Settings) -> float:
    """The predicted step time (ms) alone, as :func:`predict` gives it: what a search needs."""
    return statistics.median(replay.replay_step(model, settings, s)["predicted_ns"] / 1e6 for s in model.steps)


def timeline(model: Model, settings: Settings, step, result: dict):
    """One step, predicted and measured, as rows ``source, rank, lane, name, start_ms, end_ms``."""
    origin = min(step.t0.values())
    measured = {"chains": replay.measured_chains(step)[0],
                "runs": [(float(st), float(st + cost), []) for _, _, _, _, st, cost in step.responses]}
    rows = _rows("predicted", step, result, origin) + _rows("measured", step, measured, origin)
    return pd.DataFrame(rows, columns=["source", "rank", "lane", "name", "start_ms", "end_ms"])


def _rows(source, step, result, origin):
    ms = 1e6
    rows = []
    for r, (seg, waits, end, start, _) in sorted(result["chains"].items()):
        cuts = [start, *(t for wait in waits for t in wait), end]   # compute, wait, compute, ..., compute
        spans = [("framework", "wait" if i % 2 else "compute", a, b) for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]
        for name, k, off, dur in step.chains[r].phases:
            t = seg[min(k, len(seg) - 1)] + off
            spans.append(("phase", name, t, t + dur))
        spans += [("comm", f"{len(batch)} tensor(s)" if batch else "collective", a, b)
                  for a, b, batch in result["runs"]]
        rows += [(source, r, lane, name, (a - origin) / ms, (b - origin) / ms) for lane, name, a, b in spans]
    return rows
