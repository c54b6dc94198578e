"""Kineto group: parsing torch.profiler traces, ringscope against HolisticTraceAnalysis (HTA).

Inputs: the real GPU traces of ``../shared/kineto_traces`` (uncompressed) and ``single_rank`` with its
window repeated three times (58 MB) and twice (39 MB; times shifted past the previous copy, correlation
ids offset so kernels still find their launches). Each side runs in a fresh interpreter, alternating,
``reps`` times; HTA runs under ``$RINGSCOPE_HTA_PYTHON`` (a virtualenv with
``pip install HolisticTraceAnalysis``), and without it the speed ratios are reported as not measured.
Parse speed is CPU seconds of the parsing process (both sides parse on one thread; on a shared machine
wall time mostly measures the neighbours), wall seconds are shown too. Peak memory is ringscope's
peak above its imports, against the uncompressed trace size.

The time to the answer (issue 43) is the last row: ``ringscope summarize TRACE --json --no-cache`` against
HTA doing the same (import, parse, temporal breakdown, comm/comp overlap, idle time), each a whole process
timed from its start to its exit, in alternated pairs, both with their bytecode cached (an installed
package's is; ``PYTHONDONTWRITEBYTECODE=1`` would make ours compile its ~60 modules on every run); its
speedup is of wall seconds (CPU shown too).
"""
from __future__ import annotations

import gzip
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench import stats
from bench.launch import ROOT, run_json, run_py_json, run_text

SHARED = ROOT.parent / "shared" / "kineto_traces"
TRACES = {"nccl_2rank": "nccl_2rank/rank-0.json.gz", "single_rank": "single_rank/rank-0.pt.trace.json.gz"}
COMMAND_TRACE = "single_rank_x2"   # ~35 MB: the trace of the time-to-the-answer target (issue 43)


def _big(src: bytes, copies: int) -> bytes:
    import orjson

    doc = orjson.loads(src)
    ev = doc["traceEvents"]
    xs = [e for e in ev if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    lo, hi = min(e["ts"] for e in xs), max(e["ts"] + e.get("dur", 0) for e in xs)
    corr = max((e.get("args") or {}).get("correlation", 0) for e in ev if isinstance(e.get("args"), dict)) + 1
    out = list(ev)
    for k in range(1, copies):
        for e in ev:
            if e.get("ph") == "M":
                continue
            e2 = dict(e, ts=e["ts"] + k * (hi - lo + 1000)) if isinstance(e.get("ts"), (int, float)) else dict(e)
            a = e2.get("args")
            if isinstance(a, dict):
                a = dict(a)
                for key in ("correlation", "External id"):
                    if isinstance(a.get(key), int):
                        a[key] += k * corr
                e2["args"] = a
            if e2.get("ph") in ("s", "f") and isinstance(e2.get("id"), int):
                e2["id"] += k * corr
            if isinstance(e2.get("name"), str) and e2["name"].startswith("ProfilerStep#"):
                e2["name"] = f"ProfilerStep#{int(e2['name'][13:]) + k * 100}"
            out.append(e2)
    doc["traceEvents"] = out
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2)


def _inputs(work: Path) -> dict:
    found = {}
    for name, rel in TRACES.items():
        if (SHARED / rel).exists():
            d = work / name
            d.mkdir()
            data = gzip.decompress((SHARED / rel).read_bytes())
            (d / "rank-0.json").write_bytes(data)
            found[name] = d / "rank-0.json"
    if "single_rank" in found:
        for copies in (3, 2):
            d = work / f"single_rank_x{copies}"
            d.mkdir()
            (d / "rank-0.json").write_bytes(_big(found["single_rank"].read_bytes(), copies))
            found[d.name] = d / "rank-0.json"
    return found


def _whole(cmd: list[str], env: dict) -> dict:
    """Wall and CPU seconds (its own and its children's) of ``cmd``, from its process's start to its exit."""
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    run_text(cmd, timeout=600, env=env, label=" ".join(Path(c).name for c in cmd[1:4]))
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_s": wall, "cpu_s": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime}


def command_pairs(path: Path, hta: str, reps: int) -> dict:
    """``reps`` alternated pairs of whole commands on ``path``: ringscope's summarize, HTA's same answer. Both
    run with their bytecode cached, as an installed package's is (a first, unmeasured run of each writes
    what is missing), whatever ``PYTHONDONTWRITEBYTECODE`` says here."""
    env = {"PYTHONDONTWRITEBYTECODE": None}
    ours = [sys.executable, "-m", "viewer.cli", "summarize", str(path), "--json", "--no-cache"]
    theirs = [hta, str(ROOT / "bench" / "kineto_hta_probe.py"), str(path.parent), "--figures"]
    for cmd in (ours, theirs):
        _whole(cmd, env)   # writes the bytecode
    pairs: dict = {"ringscope": [], "hta": []}
    for _ in range(reps):
        pairs["ringscope"].append(_whole(ours, env))
        pairs["hta"].append(_whole(theirs, env))
    return pairs


def _command_row(name: str, mb: float, pairs: dict) -> tuple[dict, dict]:
    ours, theirs = pairs["ringscope"], pairs["hta"]
    wall = stats.paired_ratio([r["wall_s"] for r in theirs], [r["wall_s"] for r in ours])
    cpu = stats.paired_ratio([r["cpu_s"] for r in theirs], [r["cpu_s"] for r in ours])
    row = {"trace": f"{name}: whole command", "MB": mb,
           **{f"{side}_{k}": stats.median([r[k] for r in pairs[side]]) for side in pairs for k in ("cpu_s", "wall_s")},
           "speedup": wall}
    spread = stats.ratio_range([r["wall_s"] for r in theirs], [r["wall_s"] for r in ours])
    metric = {"value": wall, "detail": f"wall seconds from process start, median of {len(ours)} alternated pairs "
                                       f"({spread}); CPU seconds {cpu:.2f}x"}
    return row, metric


def run(quick: bool) -> dict:
    reps = 1 if quick else 3
    rows, metrics, notes, raw = [], {}, [], {}
    hta = os.environ.get("RINGSCOPE_HTA_PYTHON")
    if not hta:
        notes.append("HTA not measured: set RINGSCOPE_HTA_PYTHON to a python with HolisticTraceAnalysis "
                     "(python -m venv /tmp/hta && /tmp/hta/bin/pip install HolisticTraceAnalysis)")
    if not SHARED.exists():
        return {"rows": [], "metrics": {}, "notes": [f"{SHARED} is absent: no Kineto traces to parse"]}
    work = Path(tempfile.mkdtemp(prefix="ringscope-bench-kineto-"))
    try:
        inputs = _inputs(work)
        for name, path in inputs.items():
            if name == COMMAND_TRACE:
                continue
            mb = path.stat().st_size / 1e6
            ours, theirs = [], []
            for _ in range(reps):
                ours.append(run_py_json("kineto_probe.py", [path], timeout=300))
                if hta:
                    theirs.append(run_json([hta, str(ROOT / "bench" / "kineto_hta_probe.py"), str(path.parent)],
                                           timeout=600, label="kineto_hta_probe.py"))
            raw[name] = {"ringscope": ours, "hta": theirs, "mb": mb}
            cpu = stats.median([r["cpu_s"] for r in ours])
            peak = stats.median([r["peak_above_imports"] for r in ours]) / (mb * 1e6)
            row = {"trace": name, "MB": mb, "events": ours[0]["events"], "ringscope_cpu_s": cpu,
                   "ringscope_wall_s": stats.median([r["wall_s"] for r in ours]),
                   "ringscope_MBps_cpu": mb / cpu, "peak_mem_x_trace": peak}
            metrics[f"kineto.peak_mem_vs_trace.{name}"] = {"value": peak, "detail": f"{mb:.1f} MB trace"}
            metrics[f"kineto.parse_MBps_per_core.{name}"] = {"value": mb / cpu, "detail": "CPU seconds"}
            if theirs:
                hta_cpu = stats.median([r["cpu_s"] for r in theirs])
                row.update(hta_cpu_s=hta_cpu, hta_wall_s=stats.median([r["wall_s"] for r in theirs]),
                           hta_MBps_cpu=mb / hta_cpu)
                ratio = stats.paired_ratio([r["cpu_s"] for r in theirs], [r["cpu_s"] for r in ours])
                row["speedup"] = ratio
                metrics[f"kineto.parse_speedup_vs_hta.{name}"] = {
                    "value": ratio, "detail": f"CPU seconds, median of {reps} alternated pairs"}
            rows.append(row)
        if hta and COMMAND_TRACE in inputs:
            path = inputs[COMMAND_TRACE]
            pairs = command_pairs(path, hta, 3 if quick else 5)
            raw[f"{COMMAND_TRACE}.command"] = pairs
            row, metrics[f"kineto.command_speedup_vs_hta.{COMMAND_TRACE}"] = _command_row(
                COMMAND_TRACE, path.stat().st_size / 1e6, pairs)
            rows.append(row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cols = ["trace", "MB", "events", "ringscope_cpu_s", "ringscope_wall_s", "ringscope_MBps_cpu", "hta_cpu_s",
            "hta_wall_s", "hta_MBps_cpu", "speedup", "peak_mem_x_trace"]
    return {"rows": rows, "columns": cols, "metrics": metrics, "notes": notes, "raw": raw}
