"""CPU per tensor on the user's and the engine's thread, as CPU µs (/proc) and as instructions
(callgrind), for docs/PERFORMANCE.md's "where one tensor's microseconds go".

    .venv/bin/python -m bench.per_tensor_cpu [--ranks 2] [--api torch] [--reps 5] [--callgrind [--keep DIR]]

CPU µs: ``--reps`` jobs of bench/per_tensor_probe.py, the median per thread over ranks and jobs.
Instructions: the probe under ``valgrind --tool=callgrind --separate-threads=yes`` at two step
counts; a thread's instructions per tensor are the difference of its totals over the difference of
tensors, so start-up and shutdown cancel out. ``--keep DIR`` keeps callgrind's files there (for
``callgrind_annotate``: where the instructions go). The user's thread is callgrind's thread 1; the
engine's is the other thread whose count grows with the steps. Instruction counts do not follow the
load, but they move between runs: the user's thread by up to ~3k a tensor (start-up differs by up
to ~30 M instructions), the engine's with its polling, which depends on timing (±30 %).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv", "bin")


def _probe(ranks: int, args: list[str], wrap: list[str] | None = None) -> list[dict]:
    cmd = [os.path.join(VENV, "mpiexec"), "-n", str(ranks)] + (wrap or []) + \
        [os.path.join(VENV, "python"), "-m", "bench.per_tensor_probe"] + args
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [json.loads(m) for m in re.findall(r"\{[^{}]*\}", out)]   # ranks share stdout


def proc_cpu(ranks: int, api: str, reps: int, steps: int) -> dict:
    got: dict[str, list[float]] = {}
    for _ in range(reps):
        for r in _probe(ranks, ["--api", api, "--steps", str(steps)]):
            for k in ("user_us", "engine_us", "user_sys_us", "engine_sys_us"):
                got.setdefault(k, []).append(r[k])
    out: dict = {k: statistics.median(v) for k, v in got.items()}
    out.update({k.replace("_us", "_range"): (min(v), max(v)) for k, v in got.items()
                if k in ("user_us", "engine_us")})
    return out


def _totals(prefix: str) -> dict[tuple[int, int], int]:
    """(pid, thread number) -> instructions, from callgrind's per-thread files."""
    out = {}
    for path in glob.glob(prefix + ".*-*"):
        pid, thread = path.rsplit(".", 1)[1].split("-")
        with open(path) as f:
            for line in f:
                if line.startswith("summary:"):
                    out[(int(pid), int(thread))] = int(line.split()[1])
                    break
    return out


def callgrind(ranks: int, api: str, steps: tuple[int, int], tensors: int, keep: str | None = None) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        tmp = keep or scratch
        os.makedirs(tmp, exist_ok=True)
        per_run = []
        for s in steps:
            prefix = os.path.join(tmp, f"s{s}")
            wrap = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
                    f"--callgrind-out-file={prefix}.%p"]
            _probe(ranks, ["--api", api, "--steps", str(s), "--warmup", "5"], wrap)
            tot = _totals(prefix)
            pids = sorted({p for p, _ in tot})   # ranks in pid order (each run's own)
            per_run.append([{t: n for (p, t), n in tot.items() if p == pid} for pid in pids])
    n = (steps[1] - steps[0]) * tensors
    user, engine = [], []
    for a, b in zip(*per_run):
        grow = {t: (b.get(t, 0) - a.get(t, 0)) / n for t in b if t != 1}
        user.append((b[1] - a[1]) / n)
        engine.append(max(grow.values()))
    return {"user_instr": user, "engine_instr": engine}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--api", choices=("torch", "numpy"), default="torch")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--tensors", type=int, default=92)
    p.add_argument("--callgrind", action="store_true", help="also count instructions (minutes)")
    p.add_argument("--keep", metavar="DIR", help="keep callgrind's files in DIR")
    a = p.parse_args(argv)
    res = {"ranks": a.ranks, "api": a.api, **proc_cpu(a.ranks, a.api, a.reps, a.steps)}
    if a.callgrind:
        res.update(callgrind(a.ranks, a.api, (10, 60), a.tensors, a.keep))
    json.dump(res, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
