"""Tracer group: demo training with the timeline off vs on, hot-path cost per event, writer rate."""
from __future__ import annotations

import re
import sys
import tempfile

from bench import stats
from bench.launch import BenchError, mpiexec, run_mpi_json, run_py_json, run_text

RANKS = 4   # the demo's size


def run(quick: bool) -> dict:
    rows, metrics, notes, raw = [], {}, [], {}
    try:
        res = run_mpi_json(RANKS, "train_worker.py",
                           ["--pairs", 3 if quick else 16, "--block-s", 0.6 if quick else 1.5],
                           timeout=240 if quick else 400,
                           env={"RINGSCOPE_TIMELINE": None, "HOROVOD_TIMELINE": None,
                                "RINGSCOPE_FUSION_THRESHOLD": None, "RINGSCOPE_BACKEND": None})
        raw["training"] = res
        off, on, steps = res["off"], res["on"], res["steps"]
        sps_off, sps_on = steps / stats.median(off), steps / stats.median(on)
        ratio = stats.paired_ratio(on, off)
        rows.append({"measure": f"demo training ({res['model']}, {RANKS} ranks), timeline off",
                     "value": sps_off, "unit": "steps/s"})
        rows.append({"measure": "demo training, timeline on", "value": sps_on, "unit": "steps/s"})
        rows.append({"measure": "timeline bytes per step (all ranks)",
                     "value": res["trace_bytes"] / (steps * res["blocks_on"]), "unit": "B"})
        metrics["tracer.timeline_slowdown"] = {
            "value": ratio, "detail": f"time per block on/off, median of {len(on)} pairs of "
                                      f"{steps} steps (range {stats.ratio_range(on, off)})"}
    except BenchError as exc:
        notes.append(f"demo training: {exc}")
    per_step(quick, rows, metrics, notes, raw)
    if not quick:
        try:   # the noise floor: the same job and pairing, the timeline never started
            res = run_mpi_json(RANKS, "train_worker.py", ["--pairs", 8, "--block-s", 1.5, "--control"],
                               timeout=600, env={"RINGSCOPE_TIMELINE": None, "HOROVOD_TIMELINE": None,
                                                 "RINGSCOPE_FUSION_THRESHOLD": None,
                                                 "RINGSCOPE_BACKEND": None})
            raw["control"] = res
            metrics["tracer.timeline_control_ratio"] = {
                "value": stats.paired_ratio(res["on"], res["off"]),
                "detail": f"noise floor: off vs off, {len(res['on'])} pairs of {res['steps']} steps "
                          f"(range {stats.ratio_range(res['on'], res['off'])}); no target"}
        except BenchError as exc:
            notes.append(f"control (off vs off): {exc}")
        try:
            res = demo_script_pairs(pairs=2, steps=30)
            raw["demo_script"] = res
            r = stats.paired_ratio(res["on"], res["off"])
            rows.append({"measure": "demo_train.py launches, timeline off",
                         "value": 1 / stats.median(res["off"]), "unit": "steps/s"})
            rows.append({"measure": "demo_train.py launches, timeline on",
                         "value": 1 / stats.median(res["on"]), "unit": "steps/s"})
            metrics["tracer.demo_script_slowdown"] = {
                "value": r, "detail": f"cross-check, {len(res['on'])} pairs of whole "
                                      f"{res['steps']}-step runs (no target; less precise)"}
        except BenchError as exc:
            notes.append(f"demo_train.py cross-check: {exc}")
    try:
        res = run_py_json("tracer_probe.py", ["--runs", 1 if quick else 3], timeout=240)
        raw["probe"] = res
        for mode, calls in res["hot_path_ns_per_event"].items():
            for call, ns in calls.items():
                rows.append({"measure": f"hot path {call}, NVTX {mode[5:]}", "value": ns / 1e3,
                             "unit": "us/event"})
            worst = max(calls, key=calls.get)
            metrics[f"tracer.hot_path_us_per_event.{mode}"] = {
                "value": calls[worst] / 1e3, "detail": f"worst call: {worst}"}
        rows.append({"measure": "writer", "value": res["writer_events_per_s"],
                     "unit": "events/s"})
        rows.append({"measure": "writer bytes per event on disk",
                     "value": res["writer_bytes_per_event"], "unit": "B"})
        metrics["tracer.writer_events_per_s"] = {"value": res["writer_events_per_s"],
                                                 "detail": "no target (information)"}
    except BenchError as exc:
        notes.append(f"hot path / writer (bench/tracer_overhead.py): {exc}")
    return {"rows": rows, "metrics": metrics, "notes": notes, "raw": raw,
            "columns": ["measure", "value", "unit"]}


def per_step(quick: bool, rows: list, metrics: dict, notes: list, raw: dict) -> None:
    """Recording switched on every other step (``recording_worker.py``): the marginal cost per
    step, at 2 ranks (a core each) and at the demo's 4, with its noise floor."""
    # Neighbouring steps differ by ±5 ms (IQR) at 2 ranks, so a standard error of ~0.35 % needs
    # ~2000 pairs: 1000 pairs (session 3) gave ±0.7 %, and runs of the same code spread by 1-2 %.
    runs = [(2, 200, False)] if quick else \
        [(2, 4000, False), (2, 2000, True), (RANKS, 2000, False)]
    for ranks, steps, control in runs:
        label = f"per_step_{ranks}_ranks" + ("_control" if control else "")
        try:
            res = run_mpi_json(ranks, "recording_worker.py",
                               ["--steps", steps] + (["--control"] if control else []),
                               timeout=600, env={"RINGSCOPE_TIMELINE": None, "HOROVOD_TIMELINE": None,
                                                 "RINGSCOPE_FUSION_THRESHOLD": None,
                                                 "RINGSCOPE_BACKEND": None})
        except BenchError as exc:
            notes.append(f"recording per step ({label}): {exc}")
            continue
        raw[label] = res
        marginal, se = stats.paired_mean_ratio(res["on"], res["off"])
        cpu = [stats.paired_mean_diff(on, off) for on, off in zip(res["cpu_on"], res["cpu_off"])]
        cpu_txt = ", ".join(f"{d * 1e3:+.2f}±{e * 1e3:.2f}" for d, e in cpu)
        # The worker wakes the writer in recorded steps (staggered across ranks, as independent
        # timers put its flushes), so the ratio holds the writer's cost; its CPU is shown apart.
        writer = 2 * stats.median(res["writer_cpu_s_per_step"])
        key = ("tracer.recording_control." if control else "tracer.timeline_slowdown.") + label
        metrics[key] = {"value": marginal, "detail": (
            f"{len(res['on'])} pairs of neighbouring steps, mean step "
            f"{stats.median(res['off']) * 1e3:.1f} ms: recording and writing on/off {marginal:.4f} "
            f"(standard error ±{se:.4f}); CPU ms per rank and recorded step, on minus off (the "
            f"writer's included): {cpu_txt}; the writer's thread alone {writer * 1e3:.2f}" +
            ("; noise floor, no target" if control else ""))}
        rows.append({"measure": f"step time recording and writing on / off, {label}",
                     "value": marginal,
                     "unit": f"x (±{se:.3f})"})
        rows.append({"measure": f"writer thread CPU per recorded step, {label}",
                     "value": writer * 1e3, "unit": "ms/rank"})


DEMO_LINE = re.compile(r"\[demo\] (\d+) steps in ([0-9.]+)s")


def demo_script_pairs(pairs: int, steps: int) -> dict:
    """Cross-check on the demo script itself (``collectives/torch/demo_train.py``, healthy):
    whole launches alternating timeline off / on; steps/s as the script reports it (after init)."""
    off, on = [], []
    for p in range(pairs):
        for kind in (("off", "on") if p % 2 == 0 else ("on", "off")):
            with tempfile.TemporaryDirectory(prefix="ringscope-bench-demo-") as d:
                env = {"RINGSCOPE_TIMELINE": (d + "/") if kind == "on" else None,
                       "HOROVOD_TIMELINE": None}
                out = run_text([mpiexec(), "-n", str(RANKS), sys.executable, "-m",
                                "collectives.torch.demo_train", "--steps", str(steps)],
                               timeout=300, env=env, label=f"demo_train (timeline {kind})")
            m = DEMO_LINE.search(out)
            if not m:
                raise BenchError(f"demo_train printed no '[demo] N steps in Xs' line\n{out[-2000:]}")
            (on if kind == "on" else off).append(float(m.group(2)) / int(m.group(1)))
    return {"off": off, "on": on, "steps": steps}
