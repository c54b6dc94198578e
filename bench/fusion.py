"""Fusion group: 256 x 16 KiB async allreduces with fusion on / off against one 4 MiB allreduce."""
from __future__ import annotations

from bench import stats
from bench.launch import BenchError, run_mpi_json

LABELS = {"fused": "256 x 16 KiB, fusion on", "unfused": "256 x 16 KiB, fusion off",
          "single": "1 x 4 MiB"}


def run(quick: bool) -> dict:
    reps, block = (3, 0.1) if quick else (7, 0.3)
    rows, metrics, notes, raw = [], {}, [], {}
    for n in (2, 4):
        try:
            res = run_mpi_json(n, "fusion_worker.py", ["--reps", reps, "--block-s", block],
                               timeout=200 if quick else 300,
                               env={"RINGSCOPE_FUSION_THRESHOLD": None, "RINGSCOPE_TIMELINE": None,
                                    "RINGSCOPE_CYCLE_TIME": None, "RINGSCOPE_BACKEND": None})
        except BenchError as exc:
            notes.append(f"{n} ranks: {exc}")
            continue
        raw[n] = res
        t = res["times"]
        for v in ("fused", "unfused", "single"):
            med = stats.median(t[v])
            rows.append({"ranks": n, "variant": LABELS[v], "time_ms": med * 1e3,
                         "vs_fused": None if v == "fused" else stats.paired_ratio(t[v], t["fused"])})
        metrics[f"fusion.speedup_vs_off.n{n}"] = {
            "value": stats.paired_ratio(t["unfused"], t["fused"]),
            "detail": f"off {stats.median(t['unfused']) * 1e3:.1f} ms / on "
                      f"{stats.median(t['fused']) * 1e3:.1f} ms ({res['backend']} backend; per-rep range "
                      f"{stats.ratio_range(t['unfused'], t['fused'])})"}
        per = (stats.median(t["fused"]) - stats.median(t["single"])) / res["count"]
        metrics[f"fusion.bookkeeping_us_per_tensor.n{n}"] = {
            "value": per * 1e6,
            "detail": f"(fused {stats.median(t['fused']) * 1e3:.1f} ms - one {res['count']}x "
                      f"larger allreduce {stats.median(t['single']) * 1e3:.1f} ms) / "
                      f"{res['count']} tensors: what each tensor costs beyond the collective"}
        notes.append(f"{n} ranks: submitting the 256 allreduce_async calls alone took "
                     f"{res['submit_median_s'] * 1e3:.1f} ms on rank 0 (median)")
        metrics[f"fusion.fused_vs_single_op.n{n}"] = {
            "value": stats.paired_ratio(t["fused"], t["single"]),
            "detail": f"on {stats.median(t['fused']) * 1e3:.1f} ms / single 4 MiB "
                      f"{stats.median(t['single']) * 1e3:.1f} ms (per-rep range "
                      f"{stats.ratio_range(t['fused'], t['single'])})"}
    return {"rows": rows, "metrics": metrics, "notes": notes, "raw": raw,
            "columns": ["ranks", "variant", "time_ms", "vs_fused"]}
