"""The targets of issue 8, as comparisons on named metrics.

``kind="ratio"``: a ratio of two figures measured in the same run (machine-independent); these are
what ``--check`` gates. ``kind="absolute"``: a time, rate or size on this machine; reported with its
verdict, gated only with ``--check --strict``. A metric key matches a target when it starts with the
target's prefix (``allreduce.ring_busbw_vs_mpi.n2`` and ``.n4`` are both checked).
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    prefix: str
    op: str          # ">=" or "<="
    limit: float
    kind: str        # "ratio" | "absolute"
    text: str
    unit: str = "x"


TARGETS = [
    Target("allreduce.ring_busbw_vs_mpi", ">=", 1.0, "ratio",
           "ring busbw >= 1.0x raw MPI at >= 1 MiB (worst size)"),
    Target("allreduce.ring_latency_vs_mpi", "<=", 2.0, "ratio",
           "ring latency <= 2x raw MPI at 4-64 KiB (worst size)"),
    Target("allreduce.e2e_ring_small_latency_vs_cycle", "<=", 0.25, "ratio",
           "end-to-end 4 KiB latency far below a 1 ms cycle (<= 0.25 cycle)"),
    Target("allreduce.e2e_mpi_small_latency_vs_cycle", "<=", 0.25, "ratio",
           "end-to-end 4 KiB latency far below a 1 ms cycle (<= 0.25 cycle)"),
    Target("fusion.speedup_vs_off.n4", ">=", 5.0, "ratio",
           "256 x 16 KiB fused >= 5x faster than fusion off at 4 ranks"),
    Target("fusion.speedup_vs_off.n2", ">=", 3.0, "ratio",
           "256 x 16 KiB fused >= 3x faster than fusion off at 2 ranks"),
    Target("fusion.fused_vs_single_op.n2", "<=", 2.0, "ratio",
           "256 x 16 KiB fused within 2x of one 4 MiB allreduce at 2 ranks"),
    Target("fusion.fused_vs_single_op.n4", "<=", 2.5, "ratio",
           "256 x 16 KiB fused within 2.5x of one 4 MiB allreduce at 4 ranks"),
    Target("fusion.bookkeeping_us_per_tensor", "<=", 10.0, "absolute",
           "per-tensor bookkeeping (submit to handle ready, minus the collective) <= 10 us", "us"),
    Target("horovod.step_vs_horovod", "<=", 1.0, "ratio",
           "the same training script: ringscope's step <= 1.0x Horovod 0.28.1's (2 and 4 ranks)"),
    Target("negotiation.cached_rank0_growth_64_to_1024", "<=", 1.5, "ratio",
           "rank 0's cached-path cycle does not grow with ranks (1024 vs 64 ranks <= 1.5x)"),
    Target("tracer.timeline_slowdown", "<=", 1.01, "ratio",
           "demo training with the timeline on <= 1% slower"),
    Target("tracer.hot_path_us_per_event", "<=", 2.0, "absolute",
           "hot-path cost per event <= 2 us", "us"),
    Target("analyzer.summarize_MBps_per_core", ">=", 50.0, "absolute",
           "summarize >= 50 MB/s of trace per core", "MB/s"),
    Target("analyzer.read_MBps_per_core", ">=", 150.0, "absolute",
           "our trace read into columns >= 150 MB/s per core (issue 29)", "MB/s"),
    Target("analyzer.peak_mem_vs_trace", "<=", 3.0, "ratio",
           "summarize peak memory <= 3x trace size"),
    Target("analyzer.cached_load_speedup", ">=", 5.0, "ratio",
           "second load (parse cache) >= 5x faster than the first"),
    Target("analyzer.merge_8x100k_s", "<=", 10.0, "absolute",
           "merge 8 ranks x 100k events <= 10 s", "s"),
    Target("dashboard.first_view_s", "<=", 5.0, "absolute",
           "dashboard first view of a 1M-event run <= 5 s", "s"),
    Target("dashboard.heatmap_after_first_view_s", "<=", 2.0, "absolute",
           "the rank x step heatmap <= 2 s after the first view, at 1,024 ranks (issue 43)", "s"),
    Target("dashboard.timeline_64_ranks_draw_s", "<=", 2.0, "absolute",
           "the timeline of a 64-rank run (one lane a rank) drawn <= 2 s (issue 42)", "s"),
    Target("kineto.parse_speedup_vs_hta", ">=", 10.0, "ratio",
           "Kineto trace parsed >= 10x faster than HolisticTraceAnalysis (issue 29)"),
    Target("kineto.peak_mem_vs_trace", "<=", 3.0, "ratio",
           "Kineto parse peak memory <= 3x the uncompressed trace (issue 29)"),
    Target("kineto.command_speedup_vs_hta", ">=", 10.0, "ratio",
           "ringscope summarize on a ~35 MB Kineto trace, whole process, >= 10x faster than HTA 0.5's import, "
           "parse, temporal breakdown, overlap and idle time (wall seconds; issue 43)"),
    Target("multihost.hier_speedup", ">=", 1.3, "ratio",
           "hierarchical allreduce >= 1.3x faster than the flat ring at >= 4 MiB, 2 hosts x 2 ranks, "
           "1 Gbit/s links (issue 31)"),
]

GROUP_OF = {t.prefix: t.prefix.split(".")[0] for t in TARGETS}


def evaluate(metrics: dict, groups: list[str]) -> list[dict]:
    """One verdict per (target, matching metric); a target of a measured group with no metric
    is a verdict ``missing``."""
    out = []
    for t in TARGETS:
        if GROUP_OF[t.prefix] not in groups:
            continue
        keys = sorted(k for k in metrics if k == t.prefix or k.startswith(t.prefix + "."))
        if not keys:
            out.append({"target": t.text, "metric": t.prefix, "kind": t.kind, "limit": t.limit,
                        "op": t.op, "unit": t.unit, "value": None, "status": "missing",
                        "by": None, "detail": "not measured"})
        for k in keys:
            v = metrics[k]["value"]
            ok = (v >= t.limit if t.op == ">=" else v <= t.limit) \
                if v is not None and not math.isnan(v) else False
            # how far from the limit, as a factor (> 1 means a miss by that factor)
            by = None
            if v and not math.isnan(v):
                by = t.limit / v if t.op == ">=" else v / t.limit
            out.append({"target": t.text, "metric": k, "kind": t.kind, "limit": t.limit,
                        "op": t.op, "unit": t.unit, "value": v,
                        "status": "met" if ok else "MISSED", "by": by,
                        "detail": metrics[k].get("detail", "")})
    return out


def gating(verdicts: list[dict], strict: bool) -> list[dict]:
    """The verdicts that fail ``--check`` (ratios always; absolute ones with ``strict``)."""
    return [v for v in verdicts if v["status"] != "met" and (v["kind"] == "ratio" or strict)]
