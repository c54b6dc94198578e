"""Horovod group: the same scripts on ringscope and on Horovod 0.28.1, alternated job by job.

Horovod lives in its own venv, built by ``bench/horovod_env.sh`` outside the repository; without it
the group is skipped with the reason. Each pair of jobs runs ``bench/yardstick_worker.py`` once per
runtime, in alternating order, with the same settings (fusion threshold, cycle time, cache capacity
through the ``HOROVOD_*`` variables both read), each runtime under its own venv's ``mpiexec``
(Horovod's ``horovodrun`` does not know MPICH 5), every rank bound to a core round robin
(``-bind-to core``): unbound, the scheduler's placement moved a runtime's 2-rank step by up to
~1.5x from job to job, more than the difference being measured. Ratios are medians of the
per-pair ratios.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench import stats
from bench.launch import ROOT, BenchError, mpiexec, run_json

SETTINGS = {"HOROVOD_FUSION_THRESHOLD": 128 * 1024 * 1024, "HOROVOD_CYCLE_TIME": 1,
            "HOROVOD_CACHE_CAPACITY": 1024}
CLEAR = {k: None for k in ("RINGSCOPE_FUSION_THRESHOLD", "RINGSCOPE_CYCLE_TIME", "RINGSCOPE_TIMELINE",
                           "RINGSCOPE_CACHE_CAPACITY", "RINGSCOPE_BACKEND", "HOROVOD_TIMELINE")}
RUNTIMES = ("ringscope", "horovod")


def horovod_venv() -> Path:
    """Where ``bench/horovod_env.sh`` puts the venv (``$RINGSCOPE_HOROVOD_VENV`` or the cache)."""
    out = subprocess.run(["bash", str(ROOT / "bench" / "horovod_env.sh"), "--path"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def skip_reason(venv: Path) -> str | None:
    if not (venv / ".horovod-0.28.1-built").exists():
        return (f"skipped: no Horovod 0.28.1 venv at {venv}; build it with "
                f"`bash bench/horovod_env.sh` (~10 min on 2 cores)")
    return None


def _job(runtime: str, n: int, args: list, venv: Path, env: dict, timeout: float) -> dict:
    if runtime == "horovod":
        launcher, python = str(venv / "bin" / "mpiexec"), str(venv / "bin" / "python")
    else:
        launcher, python = mpiexec(), sys.executable
    cmd = [launcher, "-n", str(n), "-bind-to", "core", python, str(ROOT / "bench" / "yardstick_worker.py"), runtime,
           *map(str, args)]
    return run_json(cmd, timeout, {**CLEAR, **SETTINGS, **env},
                    label=f"yardstick_worker.py {runtime} {args[0]} on {n} ranks")


def run(quick: bool) -> dict:
    venv = horovod_venv()
    reason = skip_reason(venv)
    if reason:
        return {"rows": [], "metrics": {}, "notes": [reason], "skipped": reason}
    pairs, steps, reps = (2, 15, 3) if quick else (3, 25, 5)
    jobs = {"train": (["train", "--steps", steps], {}),
            "fused": (["burst", "--reps", reps, "--block-s", 0.1], {}),
            "off": (["burst", "--reps", reps, "--block-s", 0.1], {"HOROVOD_FUSION_THRESHOLD": 0})}
    rows, metrics, notes, raw = [], {}, [], {}
    for n in (2, 4):
        got = {(rt, j): [] for rt in RUNTIMES for j in jobs}
        try:
            for p in range(pairs):
                order = RUNTIMES if p % 2 == 0 else RUNTIMES[::-1]
                for j, (args, env) in jobs.items():
                    for rt in order:
                        got[rt, j].append(_job(rt, n, args, venv, env, 300))
        except BenchError as exc:
            notes.append(f"{n} ranks: {exc}")
            continue
        raw[n] = {f"{rt}.{j}": v for (rt, j), v in got.items()}
        # per job: the median step / burst / single; pairs are the jobs of the same index
        med = {"step": {rt: [stats.median(r["step_s"]) for r in got[rt, "train"]] for rt in RUNTIMES},
               "fused": {rt: [stats.median(r["times"]["burst"]) for r in got[rt, "fused"]]
                         for rt in RUNTIMES},
               "single": {rt: [stats.median(r["times"]["single"]) for r in got[rt, "fused"]]
                          for rt in RUNTIMES},
               "off": {rt: [stats.median(r["times"]["burst"]) for r in got[rt, "off"]]
                       for rt in RUNTIMES}}
        labels = {"step": "training step (MLP, 92 gradients)", "fused": "256 x 16 KiB, fusion on",
                  "off": "256 x 16 KiB, fusion off", "single": "1 x 4 MiB"}
        for k, label in labels.items():
            r, h = med[k]["ringscope"], med[k]["horovod"]
            rows.append({"ranks": n, "measure": label, "ringscope_ms": stats.median(r) * 1e3,
                         "horovod_ms": stats.median(h) * 1e3, "ringscope/horovod":
                         stats.paired_ratio(r, h)})
        # within one job, rep by rep; across the on/off jobs of one pair
        ratio = {rt: {"fused_vs_single": stats.median(
                          [stats.paired_ratio(x["times"]["burst"], x["times"]["single"])
                           for x in got[rt, "fused"]]),
                      "off_vs_fused": stats.paired_ratio(med["off"][rt], med["fused"][rt])}
                 for rt in RUNTIMES}
        for what, text in (("fused_vs_single", "fused burst / one 4 MiB allreduce"),
                           ("off_vs_fused", "fusion off / on")):
            rows.append({"ranks": n, "measure": text + " (ratio)",
                         "ringscope_ms": ratio["ringscope"][what],
                         "horovod_ms": ratio["horovod"][what], "ringscope/horovod": None})
            for rt in RUNTIMES:
                metrics[f"horovod.{what}.{rt}.n{n}"] = {
                    "value": ratio[rt][what], "detail": f"{rt}, {text}, median of {pairs} jobs"}
        metrics[f"horovod.step_vs_horovod.n{n}"] = {
            "value": stats.paired_ratio(med["step"]["ringscope"], med["step"]["horovod"]),
            "detail": f"ringscope {stats.median(med['step']['ringscope']) * 1e3:.1f} ms / Horovod "
                      f"{stats.median(med['step']['horovod']) * 1e3:.1f} ms per step, median step of "
                      f"each job, {pairs} alternated pairs (per pair "
                      f"{stats.ratio_range(med['step']['ringscope'], med['step']['horovod'])})"}
    notes.append("both runtimes: fusion threshold 128 MiB (0 for 'off'), cycle 1 ms, cache 1024; "
                 "columns for the ratio rows are that runtime's own ratio")
    return {"rows": rows, "metrics": metrics, "notes": notes, "raw": raw,
            "columns": ["ranks", "measure", "ringscope_ms", "horovod_ms", "ringscope/horovod"]}
