"""Search fusion threshold x cycle time on the replay model; the best and how to apply it."""
from __future__ import annotations

import statistics

from viewer.whatif.predict import predict, step_ms
from viewer.whatif.replay import Model, Settings

MIB = 1 << 20
THRESHOLDS = (0, 64 << 10, 256 << 10, MIB, 4 * MIB, 16 * MIB, 64 * MIB, 128 * MIB)
CYCLES_MS = (0.5, 1.0, 2.0, 5.0, 10.0, 25.0)
SAME = 5e-4      # predictions this close (relative) are the same to the model
KEEP_PCT = 1.0   # a setting must beat the run's own by more than this (or the model's error) to be recommended


def grid(model: Model, thresholds=THRESHOLDS, cycles=CYCLES_MS) -> list[dict]:
    """Predicted mean step time (ms) of each (threshold, cycle), the run's own settings included."""
    return [{"fusion_threshold": t, "cycle_time_ms": c,
             "predicted_step_ms": step_ms(model, Settings(fusion_threshold=t, cycle_time_ms=c))}
            for t in sorted(set(thresholds) | {model.fusion_threshold})
            for c in sorted(set(cycles) | {model.cycle_time_ms})]


def tune(model: Model) -> dict:
    """The best setting of the grid (the run's own unless beaten by the model's error) and how sure it is."""
    rows = grid(model)
    own = next(r for r in rows if r["fusion_threshold"] == model.fusion_threshold
               and r["cycle_time_ms"] == model.cycle_time_ms)
    ranked = sorted(rows, key=lambda r: (r["predicted_step_ms"], -r["fusion_threshold"], r["cycle_time_ms"]))
    base = predict(model, Settings())
    err = statistics.median(abs(r["baseline_ms"] / r["measured_ms"] - 1) for r in base["steps"]) * 100
    keep = max(KEEP_PCT, err)
    best = ranked[0]
    if best["predicted_step_ms"] > own["predicted_step_ms"] * (1 - keep / 100):
        best = own
    # settings predicted alike (the same plan: 64 and 128 MiB when the step holds less) are one
    # choice to the model; the runner-up is the fastest that is predicted otherwise
    same = [r for r in ranked if abs(r["predicted_step_ms"] / best["predicted_step_ms"] - 1) < SAME]
    runner = next((r for r in ranked if r not in same), ranked[-1])
    lead = 100 * (runner["predicted_step_ms"] / best["predicted_step_ms"] - 1)
    level = "high" if lead > 2 * err else "low" if lead < err else "medium"
    close = [r for r in ranked if r["predicted_step_ms"] <= best["predicted_step_ms"] * (1 + err / 100)]
    return {"measured_step_ms": base["measured_step_ms"], "baseline_step_ms": base["baseline_step_ms"],
            "current": own, "assumed": list(model.assumed), "best": best, "grid": rows, "apply": apply_lines(best),
            "gain_pct": 100 * (1 - best["predicted_step_ms"] / own["predicted_step_ms"]),
            "confidence": {"level": level, "runner_up": runner, "lead_pct": lead, "model_error_pct": err,
                           "keep_pct": keep, "within_error": len(close), "same_as_best": len(same)}}


def apply_lines(best: dict) -> dict:
    """The command-line flags and environment variables that apply a setting."""
    mb, c = f"{best['fusion_threshold'] / MIB:g}", f"{best['cycle_time_ms']:g}"
    return {"ringscope_run": f"ringscope run --fusion-threshold-mb {mb} --cycle-time-ms {c}",
            "env": f"RINGSCOPE_FUSION_THRESHOLD={best['fusion_threshold']} RINGSCOPE_CYCLE_TIME={c}",
            "horovod_env": f"HOROVOD_FUSION_THRESHOLD={best['fusion_threshold']} HOROVOD_CYCLE_TIME={c}"}
