"""``ringscope diff`` against real reruns (issue 46): identical reruns of the demo's healthy job, compared
three a side, should show no change beyond the noise; a real change, three a side, should still be called.

    python -m bench.diff_reruns record DIR [--reruns 16] [--changed 5] [--changes slow-data,fusion-64k]
    python -m bench.diff_reruns score DIR [--side 3]

``record`` runs the healthy job ``--reruns`` times, then ``--changed`` rounds of a baseline (the healthy job
again, ``base-i``) and real changes, alternated so a burst of load hits them alike: by default the
slow-data scenario (rank 0's loader sleeps 40 ms a batch) and a 64 KiB fusion threshold (``--changes``:
also straggler-150, one rank sleeping 150 ms a step); it notes the machine's load1
before each run in ``DIR/load.json``. ``score`` diffs consecutive windows of the healthy reruns (runs
k..k+side-1 against the next ``side``), the same windows interleaved (every other run), consecutive
reruns one a side (today's ``diff A B``), and the first
``side`` baselines against the first ``side`` runs of each change, then all of them. Not in CI (minutes of
real runs; docs/DIFF.md has the figure).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

RANKS, STEPS = 2, 10
CHANGES = {"slow-data": ("slow-data", {}), "fusion-64k": ("healthy", {"fusion_threshold_mb": 0.0625}),
           "straggler-150": ("straggler", {"straggler_ms": 150.0})}   # one rank sleeps 150 ms a step


def record_all(root: Path, reruns: int, changed: int, changes: list[str]) -> None:
    from bench.rerun import record

    root.mkdir(parents=True, exist_ok=True)
    log_path = root / "load.json"
    log = json.loads(log_path.read_text()) if log_path.exists() else {}
    plan = [(f"healthy-{i:02d}", "healthy", {}) for i in range(reruns)]
    for i in range(changed):
        plan += [(f"base-{i}", "healthy", {})] + [(f"{name}-{i}", *CHANGES[name]) for name in changes]
    for name, scenario, opts in plan:
        if (root / name).exists():
            continue
        load1 = os.getloadavg()[0]
        t0 = time.monotonic()
        record(scenario, RANKS, STEPS, root / name, **opts)
        log[name] = {"load1_before": load1, "wall_s": round(time.monotonic() - t0, 1)}
        log_path.write_text(json.dumps(log, indent=1))
        print(f"{name}: load1 {load1:.2f}, {log[name]['wall_s']} s", flush=True)


def _call(a: list[Path], b: list[Path]) -> dict:
    from viewer.diff.compare import diff_sides
    from viewer.run import Run

    def side(paths):
        return [Run.load(p) for p in paths]

    return diff_sides(side(a), side(b))


def score(root: Path, side: int) -> None:
    healthy = sorted(p for p in root.iterdir() if p.name.startswith("healthy-"))
    print(f"{len(healthy)} healthy reruns, {side} a side" if healthy else "no healthy reruns")
    for how, order in (("consecutive", healthy), ("interleaved", healthy[0::2] + healthy[1::2])):
        calls = []
        for k in range(len(order) - 2 * side + 1):
            d = _call(order[k:k + side], order[k + side:k + 2 * side])
            calls.append(d["significant"])
            print(f"  {how} {k:2d}: {d['change_pct']:+6.1f} % (95 % {d['change_ci_pct'][0]:+.1f} to "
                  f"{d['change_ci_pct'][1]:+.1f}), p = {d['p_value']:.3f}, significant {d['significant']}")
        print(f"{how}: no change beyond noise in {calls.count(False)} of {len(calls)} pairs")
    if healthy:
        ones = [_call([x], [y])["significant"] for x, y in zip(healthy, healthy[1:])]
        print(f"one run a side, consecutive: no change beyond noise in {ones.count(False)} of {len(ones)} pairs")
    base = sorted(root.glob("base-*"))
    for name in CHANGES:
        runs = sorted(root.glob(f"{name}-*"))
        for n in sorted({side, min(len(base), len(runs))}):
            if n < 2 or n > min(len(base), len(runs)):
                continue
            d = _call(base[:n], runs[:n])
            print(f"{name}, {n} a side: {d['verdict']} (95 % {d['change_ci_pct'][0]:+.1f} to "
                  f"{d['change_ci_pct'][1]:+.1f} %)")
    log_path = root / "load.json"
    if log_path.exists():
        loads = [v["load1_before"] for v in json.loads(log_path.read_text()).values()]
        print(f"load1 before each run: {min(loads):.1f}-{max(loads):.1f} (median {sorted(loads)[len(loads) // 2]:.1f})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.diff_reruns", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("dir", type=Path)
    r.add_argument("--reruns", type=int, default=16)
    r.add_argument("--changed", type=int, default=5)
    r.add_argument("--changes", default="slow-data,fusion-64k", help=f"of {', '.join(CHANGES)}")
    s = sub.add_parser("score")
    s.add_argument("dir", type=Path)
    s.add_argument("--side", type=int, default=3)
    ns = p.parse_args(argv)
    if ns.cmd == "record":
        record_all(ns.dir, ns.reruns, ns.changed, ns.changes.split(","))
    else:
        score(ns.dir, ns.side)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
