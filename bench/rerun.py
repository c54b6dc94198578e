"""Record a demo run under given settings (a subprocess: the viewer never imports the runtime), for
checking predictions against real reruns (tests/whatif, bench/whatif_accuracy.py)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from viewer.cli import demo


def record(scenario: str, ranks: int, steps: int, out: Path, fusion_threshold_mb: float | None = None,
           cycle_time_ms: float | None = None, straggler_ms: float | None = None,
           timeout_s: float = 600) -> Path:
    """Run the demo's training job with the timeline into ``out``; raise RuntimeError with the job's
    tail when it fails. Where every rank can have a core of its own, each is bound to one: unbound,
    two runs of one setting at 2 ranks on 2 cores came out up to 1.6x apart as the scheduler placed
    the ranks, which drowns the model's error. With more ranks than cores they stay unbound (bound,
    the pairs sharing a core still differed run to run, and by more)."""
    ns = demo.parse(["--scenario", scenario, "--ranks", str(ranks), "--steps", str(steps), "--out", str(out)])
    err = demo.prepare_run_dir(out)
    if err:
        raise RuntimeError(err)
    cmd, env = demo.train_command(ns, out)
    at = cmd.index(str(demo.TRAIN_SCRIPT))   # after the scenario's own options: these win
    opts = ["--bind-to", "core"] if ranks <= len(os.sched_getaffinity(0)) else []
    if fusion_threshold_mb is not None:
        opts += ["--fusion-threshold-mb", f"{fusion_threshold_mb:g}"]
    if cycle_time_ms is not None:
        opts += ["--cycle-time-ms", f"{cycle_time_ms:g}"]
    cmd[at:at] = opts
    if straggler_ms is not None:
        cmd += ["--straggler-ms", f"{straggler_ms:g}"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"{scenario} on {ranks} ranks failed ({proc.returncode}):\n"
                           f"{(proc.stdout + proc.stderr)[-3000:]}")
    return out
