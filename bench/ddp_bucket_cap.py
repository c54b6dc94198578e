"""DDP's bucket_cap_mb, two targets of issue 44 (docs/DDP.md):

- the finding: a DDP MLP of many small layers (32 x 128 wide, 2 MiB of gradients; gloo, CPU, 2 ranks)
  watched at a cap far too small for it, then rerun at the figure the finding gives and at torch's default;
  the median step of each job, and the findings;
- ``--whatif``: ``whatif --bucket-cap-mb`` within 15 % of real reruns, median over 3 sizes, for the candidate
  model in bench/ddp_bucket_model.py (not shipped). Each of 4 caps is run ``--reps`` times, alternated (the
  load drifts); every trace then predicts the 3 other caps, or refuses or declines in one line, and each
  prediction (the median over that cap's traces) is compared with the median of the reruns' measured
  steps. The model's layers cycle in width (``--widths``) so that a trace holds buckets of several sizes,
  which the allreduce's cost fit needs. Prints the load before and after.

``.venv/bin/python -m bench.ddp_bucket_cap [--steps 20] [--cap-mb 0.01]`` or
``.venv/bin/python -m bench.ddp_bucket_cap --whatif [--reps 3] [--caps 0.01,0.1,0.5,25] [--widths 128,256,64]``.
Prints figures, asserts nothing.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile

from bench.launch import BenchError, run_json
from bench.stats import median

LAYERS, WIDTH, DEFAULT_CAP_MB = 32, 128, 25.0
TARGET_PCT = 15.0


def _job(cap_mb: float, steps: int, trace_dir: str, widths: str = str(WIDTH)) -> float:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
           "bench.ddp_cap_worker", str(cap_mb), str(steps), str(LAYERS), widths]
    env = {"OMP_NUM_THREADS": "1", "RINGSCOPE_TIMELINE": f"{trace_dir}/"}
    return median(run_json(cmd, timeout=600, env=env, label=f"ddp cap {cap_mb}")["step_s"])


def _findings(trace_dir: str) -> list[dict]:
    from viewer.run import Run
    return Run.load(trace_dir, cache=False).findings().to_dict("records")


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def finding(a) -> None:
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


def whatif(a) -> None:
    from bench import ddp_bucket_model as buckets
    from viewer.run import Run

    caps = [float(c) for c in a.caps.split(",")]
    print(f"load before: {_load()}; {len(caps)} caps x {a.reps} reruns, widths {a.widths}, {a.steps} steps a job")
    measured: dict[float, list[float]] = {c: [] for c in caps}
    models: dict[float, list] = {c: [] for c in caps}
    refused: dict[float, list[str]] = {c: [] for c in caps}
    with tempfile.TemporaryDirectory() as d:
        for rep in range(a.reps):
            for cap in caps:
                out = f"{d}/{cap}-{rep}"
                try:
                    _job(cap, a.steps, out, a.widths)
                except BenchError as e:   # seen once: a rank aborted at exit, after its steps
                    print(f"bucket_cap_mb={cap:g}, rerun {rep}: failed, left out ({str(e).splitlines()[0]})")
                    continue
                run = Run.load(out, cache=False)
                measured[cap].append(run.step_ns / 1e6)
                try:
                    models[cap].append(buckets.fit(run))
                except buckets.BucketModelError as e:
                    refused[cap].append(str(e))
    print(f"load after: {_load()}")
    for cap in caps:
        m = measured[cap]
        print(f"bucket_cap_mb={cap:g}: measured {statistics.median(m):.1f} ms (reruns "
              f"{', '.join(f'{x:.1f}' for x in m)}; max/min {max(m) / min(m):.2f})")
    for base in caps:
        if not models[base]:
            print(f"from the traces at {base:g}: every trace refused ({refused[base][0]})")
            continue
        errs = []
        for cap in (c for c in caps if c != base):
            preds, declined = [], []
            for m in models[base]:
                try:
                    preds.append(buckets.predict(m, int(cap * buckets.MIB))["predicted_step_ms"])
                except buckets.BucketModelError as e:
                    declined.append(str(e))
            meas = statistics.median(measured[cap])
            if not preds:
                print(f"  from {base:g} to {cap:g}: every trace declined ({declined[0]})")
                continue
            errs.append(100 * abs(statistics.median(preds) / meas - 1))
            print(f"  from {base:g} to {cap:g}: predicted {statistics.median(preds):.1f} ms "
                  f"({', '.join(f'{p:.1f}' for p in preds)}; {len(declined)} declined), measured {meas:.1f} ms: "
                  f"off by {errs[-1]:.0f} %")
        if errs:
            print(f"from the traces at {base:g}: median error over {len(errs)} sizes {statistics.median(errs):.0f} % "
                  f"(target {TARGET_PCT:g} %); {len(refused[base])} of {a.reps} traces refused")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20, help="timed steps per job (default 20)")
    p.add_argument("--cap-mb", type=float, default=0.01, help="the too-small cap (default 0.01)")
    p.add_argument("--whatif", action="store_true", help="whatif --bucket-cap-mb against real reruns")
    p.add_argument("--reps", type=int, default=3, help="--whatif: reruns per cap (default 3)")
    p.add_argument("--caps", default="0.01,0.1,0.5,25", help="--whatif: the caps (MiB), comma-separated")
    p.add_argument("--widths", default="128,256,64", help="--whatif: the layers' widths, cycled")
    a = p.parse_args(argv)
    (whatif if a.whatif else finding)(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
