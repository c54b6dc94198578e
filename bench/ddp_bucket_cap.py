"""Whether the bucket_cap_mb finding's figure helps (issue 44's target: a job with a bucket_cap_mb too small
for its model gets a finding that says so, with the figure to try): a DDP MLP of many small layers (32 x 128
wide, 2 MiB of gradients; gloo, CPU, 2 ranks) watched at a cap far too small for it, then rerun at the
figure the finding gives and at torch's default; the median step of each job, and the findings.

``.venv/bin/python -m bench.ddp_bucket_cap [--steps 20] [--cap-mb 0.01]``. Prints figures, asserts nothing.
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile

from bench.launch import run_json
from bench.stats import median

LAYERS, WIDTH, DEFAULT_CAP_MB = 32, 128, 25.0


def _job(cap_mb: float, steps: int, trace_dir: str) -> float:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
           "bench.ddp_cap_worker", str(cap_mb), str(steps), str(LAYERS), str(WIDTH)]
    env = {"OMP_NUM_THREADS": "1", "RINGSCOPE_TIMELINE": f"{trace_dir}/"}
    return median(run_json(cmd, timeout=600, env=env, label=f"ddp cap {cap_mb}")["step_s"])


def _findings(trace_dir: str) -> list[dict]:
    from viewer.run import Run
    return Run.load(trace_dir, cache=False).findings().to_dict("records")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20, help="timed steps per job (default 20)")
    p.add_argument("--cap-mb", type=float, default=0.01, help="the too-small cap (default 0.01)")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        small = _job(a.cap_mb, a.steps, f"{d}/small")
        found = [f for f in _findings(f"{d}/small") if f["kind"] == "bucket_cap_small"]
        figure = float(re.search(r"bucket_cap_mb=([0-9.]+)\)", found[0]["message"]).group(1)) if found else None
        print(f"bucket_cap_mb={a.cap_mb:g}: median step {1e3 * small:.1f} ms; finding: "
              + (found[0]["title"] + f"; figure to try {figure:g}" if found else "none"))
        for cap in ([figure] if figure else []) + [DEFAULT_CAP_MB]:
            step = _job(cap, a.steps, f"{d}/{cap}")
            again = [f["kind"] for f in _findings(f"{d}/{cap}") if f["kind"] == "bucket_cap_small"]
            print(f"bucket_cap_mb={cap:g}: median step {1e3 * step:.1f} ms ({step / small:.2f}x the small cap's); "
                  f"bucket_cap finding {'again' if again else 'gone'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
