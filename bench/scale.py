"""Scale group: summarize runs of 64, 256 and 1,024 ranks x 20k events (``--quick``: 64), first parse and store.

Input: ``sample_traces/healthy`` replicated by ``bench/tracegen.py`` with a straggler planted at rank 2N/3,
under a temporary directory. Each command runs in a fresh interpreter (``bench/analyzer_probe.py``):
``summarize --json --no-cache`` (parse only), ``summarize --json`` into a fresh store (parse, write the
store), then again from the store. Figures are absolute, on this machine: wall, CPU (the parse workers'
included) and the main process's peak RSS. The planted straggler must be the first finding.

Kineto (issue 43: peak RSS <= 2x one rank's trace): ``../shared/kineto_traces/single_rank`` (a real
torch.profiler trace) replicated to 64 ranks, the same three summaries, and one rank alone; each peak is also
read above the baseline (``analyzer_probe.py baseline``: the RSS with every import a Kineto summary needs),
against one rank's trace file (uncompressed, as written).
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from bench import tracegen
from bench.launch import BenchError, run_py_json

ROOT = Path(__file__).resolve().parents[1]
EVENTS = 20_000
KINETO = ROOT.parent / "shared" / "kineto_traces" / "single_rank"
KINETO_RANKS = 64


def run(quick: bool) -> dict:
    rows, metrics, notes, raw = [], {}, [], {}
    for n in (64,) if quick else (64, 256, 1024):
        work = Path(tempfile.mkdtemp(prefix=f"ringscope-bench-scale{n}-"))
        try:
            gen = tracegen.build(ROOT / "sample_traces" / "healthy", work / "run", n, EVENTS, straggler=2 * n // 3)
            raw[n] = {"input": gen}
            for mode, args in (("--no-cache", ["summarize-nocache", work / "run"]),
                               ("first (writes the store)", ["summarize", work / "run", work / "store"]),
                               ("from the store", ["summarize", work / "run", work / "store"])):
                r = run_py_json("analyzer_probe.py", args, timeout=3600)
                raw[n][mode] = r
                rows.append({"ranks": n, "trace_MB": round(gen["bytes"] / 1e6), "summarize": mode,
                             "wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "peak_MB": r["peak_mb"]})
                if r["rc"] != 0:
                    notes.append(f"{n} ranks, summarize {mode}: exit {r['rc']}")
            first = _first_finding(work / "run", work / "store")
            if first != f"straggler:{2 * n // 3}":
                notes.append(f"{n} ranks: the first finding is {first}, not the planted straggler")
            byn = {r["summarize"]: r for r in rows if r["ranks"] == n}
            metrics[f"scale.peak_MB_{n}"] = {"value": byn["--no-cache"]["peak_MB"],
                                             "detail": f"{n} ranks x {EVENTS:,} events, summarize --no-cache"}
            metrics[f"scale.store_s_{n}"] = {"value": byn["from the store"]["wall_s"],
                                             "detail": f"{n} ranks, the second summarize (from the store), wall"}
        except (BenchError, ValueError, OSError) as exc:
            notes.append(f"{n} ranks: {exc}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    _kineto(rows, metrics, notes, raw)
    return {"rows": rows, "metrics": metrics, "notes": notes, "raw": raw,
            "columns": ["ranks", "trace_MB", "summarize", "wall_s", "cpu_s", "peak_MB", "above_base_x_rank"]}


def _kineto(rows: list, metrics: dict, notes: list, raw: dict) -> None:
    """64 copies of a real Kineto rank: each summary's peak, and above the baseline against one rank's trace."""
    if not KINETO.exists():
        notes.append(f"{KINETO} is absent: the 64-rank Kineto run not measured")
        return
    work = Path(tempfile.mkdtemp(prefix="ringscope-bench-scale-kineto-"))
    try:
        gen = tracegen.build(KINETO, work / "run", KINETO_RANKS, 0)
        (work / "one").mkdir()
        (work / "one" / "rank-00000.json").symlink_to(work / "run" / "rank-00000.json")
        rank_mb = (work / "run" / "rank-00000.json").stat().st_size / 1e6
        base = run_py_json("analyzer_probe.py", ["baseline"], timeout=300)["after_mb"]
        raw["kineto"] = {"input": gen, "baseline_mb": base, "rank_MB": rank_mb}
        worst = 0.0
        for n, mode, args in ((1, "--no-cache", ["summarize-nocache", work / "one"]),
                              (KINETO_RANKS, "--no-cache", ["summarize-nocache", work / "run"]),
                              (KINETO_RANKS, "first (writes the store)", ["summarize", work / "run", work / "store"]),
                              (KINETO_RANKS, "from the store", ["summarize", work / "run", work / "store"])):
            r = run_py_json("analyzer_probe.py", args, timeout=3600)
            raw["kineto"][f"{n} {mode}"] = r
            above = (r["peak_mb"] - base) / rank_mb
            rows.append({"ranks": f"{n} Kineto", "trace_MB": round(rank_mb * n), "summarize": mode,
                         "wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "peak_MB": r["peak_mb"],
                         "above_base_x_rank": above})
            if n > 1:
                worst = max(worst, above)
            if r["rc"] != 0:
                notes.append(f"{n} Kineto ranks, summarize {mode}: exit {r['rc']}")
        metrics["scale.kineto64_peak_above_base_vs_rank_trace"] = {
            "value": worst, "detail": f"{KINETO_RANKS} x single_rank ({rank_mb:.1f} MB a rank), the worst of the "
                                      f"three summaries, peak minus {base:.0f} MB of imports (target 2x)"}
    except (BenchError, ValueError, OSError) as exc:
        notes.append(f"{KINETO_RANKS} Kineto ranks: {exc}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _first_finding(run_dir: Path, store: Path) -> str:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "viewer.cli", "summarize", str(run_dir), "--json", "--cache-dir",
                          str(store)], cwd=ROOT, capture_output=True, text=True, timeout=3600)
    f = (json.loads(out.stdout)["findings"] or [{}])[0] if out.returncode == 0 else {}
    return f"{f.get('kind')}:{','.join(map(str, f.get('evidence', {}).get('ranks', [])))}"
