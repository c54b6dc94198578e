"""The demo's training step at 4 ranks, this checkout against another (e.g. main), paired.

    python -m bench.demo_pair --base /tmp/base [--ranks 4] [--runs 4] [--steps 15]

Jobs alternate base, this, base, this... (the same hours, the same load); each reports the slowest
rank's time per step. Prints each run's median and the paired ratio this/base with its range.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from bench.launch import BenchError, run_mpi_json

HERE = str(Path(__file__).resolve().parents[1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.demo_pair",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="the other checkout (git worktree add DIR main)")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--steps", type=int, default=15)
    ns = ap.parse_args(argv)
    med = {"base": [], "this": []}
    cpu = {"base": [], "this": []}
    for i in range(ns.runs):
        order = (("base", ns.base), ("this", HERE)) if i % 2 == 0 else \
            (("this", HERE), ("base", ns.base))
        for label, tree in order:
            try:
                res = run_mpi_json(ns.ranks, "demo_step.py", ["--tree", tree, "--steps", ns.steps],
                                   timeout=600)
            except BenchError as exc:
                print(f"demo_pair: {label} run {i}: {exc}", file=sys.stderr)
                return 1
            m = statistics.median(res["step_s"])
            med[label].append(m)
            cpu[label].append(res["cpu_s_per_step"])
            print(f"run {i} {label}: median step {m * 1e3:.1f} ms, CPU (all ranks) "
                  f"{res['cpu_s_per_step'] * 1e3:.1f} ms per step", flush=True)
    for what, d in (("step time", med), ("CPU per step", cpu)):
        ratios = [t / b for t, b in zip(d["this"], d["base"])]
        print(f"this/base {what}: median {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} pairs); base median "
              f"{statistics.median(d['base']) * 1e3:.1f} ms, this "
              f"{statistics.median(d['this']) * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
