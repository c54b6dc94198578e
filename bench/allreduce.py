"""Allreduce group: the sweep at 2 and 4 ranks, table rows and the ratios the targets check."""
from __future__ import annotations

from bench import stats
from bench.launch import BenchError, run_mpi_json

KIB, MIB = 1024, 1024 * 1024
FULL_SIZES = [4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, 1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB]
QUICK_SIZES = [4 * KIB, 64 * KIB, 1 * MIB, 16 * MIB]
LABELS = {"raw_mpi": "raw mpi4py Allreduce", "ring_alone": "ring backend alone",
          "e2e_ring": "ringscope e2e (ring)", "e2e_mpi": "ringscope e2e (mpi)",
          "gloo": "torch gloo all_reduce"}
CYCLE_MS = 1.0  # the engine's default cycle time (RINGSCOPE_CYCLE_TIME)


def run(quick: bool) -> dict:
    """Measure; return ``{"rows", "metrics", "notes", "raw"}``."""
    sizes = QUICK_SIZES if quick else FULL_SIZES
    reps, block = (5, 0.03) if quick else (7, 0.1)
    rows, metrics, notes, raw = [], {}, [], {}
    for n in (2, 4):
        try:
            res = run_mpi_json(n, "allreduce_sweep.py",
                               ["--sizes", ",".join(map(str, sizes)), "--reps", reps,
                                "--block-s", block], timeout=240 if quick else 400,
                               env={"RINGSCOPE_FUSION_THRESHOLD": None,
                                    "RINGSCOPE_CYCLE_TIME": None, "RINGSCOPE_TIMELINE": None})
        except BenchError as exc:
            notes.append(f"{n} ranks: {exc}")
            continue
        raw[n] = res
        for v, err in res["errors"].items():
            notes.append(f"{n} ranks, {v}: not measured ({err.strip().splitlines()[-1]})")
        rows += _rows(res)
        metrics.update(_metrics(res))
    return {"rows": rows, "metrics": metrics, "notes": notes, "raw": raw,
            "columns": ["ranks", "size", "variant", "time_us", "algbw_GBps", "busbw_GBps",
                        "vs_raw_mpi"]}


def _t(res, v, size):
    return res["times"].get(v, {}).get(str(size), [])


def _rows(res) -> list[dict]:
    n, out = res["ranks"], []
    for size in res["sizes"]:
        mpi = _t(res, "raw_mpi", size)
        for v in res["variants"]:
            ts = _t(res, v, size)
            t = stats.median(ts)
            alg, bus = stats.allreduce_bw(size, t, n)
            out.append({"ranks": n, "size": stats.human_bytes(size), "variant": LABELS.get(v, v),
                        "time_us": t * 1e6, "algbw_GBps": alg, "busbw_GBps": bus,
                        "vs_raw_mpi": stats.paired_ratio(ts, mpi) if mpi and v != "raw_mpi"
                        else None})
    return out


def _metrics(res) -> dict:
    """Ratios per rank count, each the worst size in its range (pair by pair per rep)."""
    n, m = res["ranks"], {}
    if {"ring_alone", "raw_mpi"} <= set(res["variants"]):
        big = [(s, stats.paired_ratio(_t(res, "raw_mpi", s), _t(res, "ring_alone", s)))
               for s in res["sizes"] if s >= MIB]
        if big:
            s, r = min(big, key=lambda x: x[1])
            m[f"allreduce.ring_busbw_vs_mpi.n{n}"] = {
                "value": r, "detail": f"worst at {stats.human_bytes(s)}; all: "
                + ", ".join(f"{stats.human_bytes(a)} {b:.2f}x" for a, b in big)}
        small = [(s, stats.paired_ratio(_t(res, "ring_alone", s), _t(res, "raw_mpi", s)))
                 for s in res["sizes"] if 4 * KIB <= s <= 64 * KIB]
        if small:
            s, r = max(small, key=lambda x: x[1])
            m[f"allreduce.ring_latency_vs_mpi.n{n}"] = {
                "value": r, "detail": f"worst at {stats.human_bytes(s)}; all: "
                + ", ".join(f"{stats.human_bytes(a)} {b:.2f}x" for a, b in small)}
    for v in ("e2e_ring", "e2e_mpi"):
        if v in res["variants"]:
            s = min(res["sizes"])
            t = stats.median(_t(res, v, s))
            m[f"allreduce.{v}_small_latency_vs_cycle.n{n}"] = {
                "value": t * 1e3 / CYCLE_MS,
                "detail": f"{t * 1e6:.0f} us at {stats.human_bytes(s)} vs a {CYCLE_MS:g} ms cycle"}
    cc = res.get("cycle_check")
    if cc:
        m[f"allreduce.e2e_latency_cycle_x10_vs_x1.n{n}"] = {
            "value": stats.paired_ratio(cc["x10"], cc["base"]),
            "detail": f"e2e ring at {stats.human_bytes(cc['size'])}: cycle {cc['cycle_ms'] * 10:g} ms "
                      f"{stats.median(cc['x10']) * 1e6:.0f} us vs {cc['cycle_ms']:g} ms "
                      f"{stats.median(cc['base']) * 1e6:.0f} us (no target; ~1 = wakes on work)"}
    return m
