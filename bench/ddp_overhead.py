"""What hvd.timeline.watch costs a DDP step (issue 44's target: at most 1 % at 2 ranks), as ratios:

- jobs: torchrun jobs alternated off (plain DDP) / on (watched, RINGSCOPE_TIMELINE set), the median step of
  each; on ÷ off per adjacent pair (the writer's and the counters' threads included);
- in job: a watched and a plain copy of the model stepped in turn in one job with the timeline on;
  watched ÷ plain per step pair (the hooks and the recording, on the training path, without the
  job-to-job noise; the writer's thread is on for both);
- CPU: the same pairs in CPU seconds per step of rank 0's process (all its threads): the work the watch
  adds, less disturbed than wall time by other processes on a shared machine;
- python hook: the same in-job pairing with torch's allreduce_hook registered instead of the watch
  (what any Python communication hook costs: the floor of a hook-based tracer).

``.venv/bin/python -m bench.ddp_overhead [--pairs 3] [--steps 60]`` (2 ranks, gloo, CPU; ~1 min a job
on a quiet 2-core machine). Prints figures, asserts nothing.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from statistics import fmean

from bench.launch import run_json
from bench.stats import median, paired_mean_ratio, paired_ratio, ratio_range


def _job(mode: str, steps: int, trace_dir: str | None) -> dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
           "bench.ddp_worker", mode, str(steps)]   # a module: bench/tracer.py must not shadow the tracer
    env = {"OMP_NUM_THREADS": "1", "RINGSCOPE_TIMELINE": f"{trace_dir}/{mode}/" if trace_dir else None}
    return run_json(cmd, timeout=600, env=env, label=f"ddp {mode}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=3, help="off/on job pairs (default 3)")
    p.add_argument("--steps", type=int, default=60, help="timed steps per job (default 60)")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        off, on, off_cpu, on_cpu = [], [], [], []
        for _ in range(a.pairs):
            for mode, wall, cpu in (("off", off, off_cpu), ("on", on, on_cpu)):
                r = _job(mode, a.steps, d if mode == "on" else None)
                wall.append(median(r["a"]))
                cpu.append(fmean(r["a_cpu"]))
        ab = _job("ab", a.steps, d)
        py = _job("pyhook", a.steps, None)
        trace = next(Path(d, "on").glob("rank-*.json"))
        size = trace.stat().st_size
    print(f"jobs:   median step off {1e3 * median(off):.2f} ms, on {1e3 * median(on):.2f} ms; on / off "
          f"{paired_ratio(on, off):.4f} (pairs {ratio_range(on, off)})")
    print(f"        CPU per step (rank 0's process, all threads) off {1e3 * median(off_cpu):.2f} ms, on "
          f"{1e3 * median(on_cpu):.2f} ms; on / off {paired_ratio(on_cpu, off_cpu):.4f} "
          f"(pairs {ratio_range(on_cpu, off_cpu)})")
    cpu, err = paired_mean_ratio(ab["a_cpu"], ab["b_cpu"])
    print(f"in job: watched {1e3 * median(ab['a']):.2f} ms, plain {1e3 * median(ab['b']):.2f} ms; watched / plain "
          f"{paired_ratio(ab['a'], ab['b']):.4f} (steps {ratio_range(ab['a'], ab['b'])}); CPU per step "
          f"watched / plain {cpu:.4f} ± {err:.4f}")
    py_cpu, py_err = paired_mean_ratio(py["a_cpu"], py["b_cpu"])
    print(f"python hook: allreduce_hook {1e3 * median(py['a']):.2f} ms, plain {1e3 * median(py['b']):.2f} ms; "
          f"hook / plain {paired_ratio(py['a'], py['b']):.4f} (steps {ratio_range(py['a'], py['b'])}); CPU per "
          f"step hook / plain {py_cpu:.4f} ± {py_err:.4f}")
    print(f"trace:  {size / (a.steps + 10) / 1024:.1f} KiB per step on rank 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
