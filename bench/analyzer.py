"""Analyzer group: summarize throughput and peak memory, merging 8 ranks x 100k events.

Input: a real 4-rank demo training run with the timeline on (``bench/train_worker.py``), replicated
and time-shifted to 8 ranks x >= 100k events (``bench/tracegen.py``). Each viewer command runs in a
fresh interpreter (``bench/analyzer_probe.py``); summarize is timed cold (a fresh parse cache dir,
so it parses and writes the cache, as a user's first run does), with ``--no-cache`` (parse only) and
warm (cache hit); the reader alone (each trace into columns, ``viewer.ringscope.reader.read``) too.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from bench import stats, tracegen
from bench.launch import BenchError, run_mpi_json, run_py_json

RANKS, EVENTS = 8, 100_000


def _real_run(work: Path) -> Path:
    res = run_mpi_json(4, "train_worker.py", ["--pairs", 1, "--block-s", 0.8, "--out",
                                              work / "real"], timeout=240,
                       env={"RINGSCOPE_TIMELINE": None, "HOROVOD_TIMELINE": None})
    src = Path(res["trace_dir"]) / "block1"
    if not list(src.glob("rank-*.json")):
        raise BenchError(f"the real run left no traces in {src}")
    return src


def run(quick: bool) -> dict:
    reps = 1 if quick else 3
    rows, metrics, notes, raw = [], {}, [], {"load_first": [], "load_cached": [],
                                             "summarize": [], "nocache": [], "warm": [],
                                             "merge": [], "read": []}
    work = Path(tempfile.mkdtemp(prefix="ringscope-bench-an-"))
    try:
        src = _real_run(work)
        big = work / "big"
        gen = tracegen.build(src, big, RANKS, EVENTS)
        raw["input"] = gen
        mb = gen["bytes"] / 1e6
        by = {}
        for i in range(reps):
            cache = work / f"cache{i}"
            load_cache = work / f"load-cache{i}"
            raw["load_first"].append(run_py_json("analyzer_probe.py", ["load", big, load_cache],
                                                 timeout=300))
            raw["load_cached"].append(run_py_json("analyzer_probe.py", ["load", big, load_cache],
                                                  timeout=300))
            shutil.rmtree(load_cache, ignore_errors=True)
            raw["summarize"].append(run_py_json("analyzer_probe.py",
                                                ["summarize", big, cache], timeout=300))
            if not quick:
                raw["warm"].append(run_py_json("analyzer_probe.py",
                                               ["summarize", big, cache], timeout=300))
                raw["nocache"].append(run_py_json("analyzer_probe.py",
                                                  ["summarize-nocache", big], timeout=300))
            raw["read"].append(run_py_json("analyzer_probe.py", ["read", big], timeout=300))
            out = work / "merged.json"
            raw["merge"].append(run_py_json("analyzer_probe.py", ["merge", big, out], timeout=300))
            out.unlink(missing_ok=True)
            shutil.rmtree(cache, ignore_errors=True)
        for key, label in (("summarize", "summarize, first run (parse + write cache)"),
                           ("nocache", "summarize --no-cache (parse only)"),
                           ("warm", "summarize, cached"), ("merge", "merge -> one Chrome trace"),
                           ("read", "read into columns (viewer.ringscope.reader.read)")):
            rs = raw[key]
            if not rs:
                continue
            bad = [r for r in rs if r["rc"] != 0]
            if bad:
                notes.append(f"{label}: exit {bad[0]['rc']}")
            cpu, wall = stats.median([r["cpu_s"] for r in rs]), stats.median([r["wall_s"] for r in rs])
            peak = stats.median([r["peak_mb"] for r in rs])
            base = stats.median([r["baseline_mb"] for r in rs])
            by[key] = {"command": label, "wall_s": wall, "cpu_s": cpu, "MBps_per_core": mb / cpu,
                       "peak_MB": peak, "peak_vs_trace": peak / mb,
                       "net_peak_vs_trace": (peak - base) / mb, "baseline_MB": base}
            rows.append(by[key])
        first, merge = by["summarize"], by["merge"]
        metrics["analyzer.read_MBps_per_core"] = {
            "value": by["read"]["MBps_per_core"],
            "detail": f"{mb:.0f} MB of trace / {by['read']['cpu_s']:.2f} CPU s: the events into columns, no tables"}
        parse_only = f"; parse only: {by['nocache']['MBps_per_core']:.0f} MB/s" \
            if "nocache" in by else ""
        metrics["analyzer.summarize_MBps_per_core"] = {
            "value": first["MBps_per_core"],
            "detail": f"{mb:.0f} MB of trace / {first['cpu_s']:.2f} CPU s (first run{parse_only})"}
        metrics["analyzer.peak_mem_vs_trace"] = {
            "value": first["peak_vs_trace"],
            "detail": f"peak RSS {first['peak_MB']:.0f} MB for {mb:.0f} MB of trace; "
                      f"{first['net_peak_vs_trace']:.2f}x above the {first['baseline_MB']:.0f} MB after imports"}
        first_load = stats.median([r["cpu_s"] for r in raw["load_first"]])
        cached_load = stats.median([r["cpu_s"] for r in raw["load_cached"]])
        metrics["analyzer.cached_load_speedup"] = {
            "value": first_load / cached_load,
            "detail": f"viewer.Run.load in a fresh process: {first_load:.2f} CPU s parsing (and "
                      f"writing the cache), {cached_load:.2f} CPU s from the cache"}
        metrics["analyzer.merge_8x100k_s"] = {
            "value": merge["wall_s"],
            "detail": f"{RANKS} ranks x {gen['events_per_rank']:,}+ events ({mb:.0f} MB), wall; "
                      f"{merge['cpu_s']:.2f} CPU s"}
        notes.append(f"input: a real 4-rank demo run, replicated x{gen['copies']} to {RANKS} ranks "
                     f"x >= {gen['events_per_rank']:,} events, {mb:.0f} MB")
    except (BenchError, ValueError, OSError) as exc:
        notes.append(str(exc))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"rows": rows, "metrics": metrics, "notes": notes, "raw": raw,
            "columns": ["command", "wall_s", "cpu_s", "MBps_per_core", "peak_MB", "peak_vs_trace",
                        "net_peak_vs_trace"]}
