"""``ringscope demo``: train a small model on N ranks with the timeline on, summarize, and view. The
training runs in a subprocess (``python -m collectives.launcher``): no runtime, torch or MPI here."""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# The summary and the dashboard load only when the training is done (the dashboard: only when shown).

ROOT = Path(__file__).resolve().parents[2]
TRAIN_SCRIPT = ROOT / "collectives" / "torch" / "demo_train.py"
DDP_SCRIPT = ROOT / "collectives" / "torch" / "demo_ddp.py"   # --ddp: torch's DDP under torchrun
DDP_SCENARIOS = ("healthy", "straggler", "slow-data", "cpu-contention", "small-buckets")
# slow-data: rank 2's loader sleeps 40 ms per batch; cpu-contention: rank 2 shares its core with 5 busy processes
DEFAULT_STEPS = {"healthy": 20, "straggler": 20, "tiny-tensors": 20, "large-tensors": 10,
                 "hang": 8, "slow-data": 20, "cpu-contention": 20}
SCENARIOS = tuple(DEFAULT_STEPS)
# scenario -> (extra launcher options, extra environment), where it has any
SETTINGS = {
    "tiny-tensors": (["--fusion-threshold-mb", "0.0625"], {}),      # 64 KiB
    "hang": ([], {"RINGSCOPE_STALL_CHECK_TIME_SECONDS": "1", "RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS": "4"}),
}
TRAIN_TIMEOUT_S = 600


def parse(argv):
    p = argparse.ArgumentParser(prog="ringscope demo", description=(
        "Train a small model on N ranks with the timeline on, print the summary and start the "
        "dashboard."))
    p.add_argument("--ranks", type=int, default=4, help="number of ranks (default 4)")
    p.add_argument("--steps", type=int, help="training steps (default: 8-20 by scenario)")
    p.add_argument("--scenario", choices=SCENARIOS + ("small-buckets",), default="healthy")
    p.add_argument("--ddp", action="store_true",
                   help="train under torch's DistributedDataParallel (gloo, torchrun) instead of our runtime; "
                        f"scenarios {', '.join(DDP_SCENARIOS)}")
    p.add_argument("--out", help="run directory for the traces "
                                 "(default ringscope-runs/demo-<scenario>-<time>)")
    p.add_argument("--no-view", action="store_true", help="exit after the summary")
    p.add_argument("--port", type=int, default=8050, help="dashboard port (default 8050)")
    ns = p.parse_args(argv)
    if ns.ranks < 1:
        p.error("--ranks must be at least 1")
    if ns.ddp and ns.scenario not in DDP_SCENARIOS:
        p.error(f"--ddp runs the scenarios {', '.join(DDP_SCENARIOS)}")
    if not ns.ddp and ns.scenario not in SCENARIOS:
        p.error(f"--scenario {ns.scenario} needs --ddp")
    if ns.steps is not None and ns.steps < 1:
        p.error("--steps must be at least 1")
    if not 0 < ns.port < 65536:
        p.error("--port must be in 1..65535")
    return ns


def prepare_run_dir(run_dir: Path) -> str | None:
    """Create the run directory and clear traces left by an earlier demo; an error or None."""
    if run_dir.exists() and not run_dir.is_dir():
        return f"{run_dir}: exists and is not a directory"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{run_dir}: cannot create the run directory ({exc.strerror or exc})"
    for old in run_dir.glob("rank-*.json"):
        old.unlink()
    return None


def train_command(ns, run_dir: Path) -> tuple[list[str], dict]:
    """The launcher command line and environment for this demo."""
    opts, extra_env = SETTINGS.get(ns.scenario, ([], {}))
    steps = ns.steps or DEFAULT_STEPS.get(ns.scenario, 20)
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}
    if ns.ddp:
        return ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ns.ranks}",
                 str(DDP_SCRIPT), "--scenario", ns.scenario, "--steps", str(steps)],
                {**env, "RINGSCOPE_TIMELINE": str(run_dir.resolve()) + os.sep, "OMP_NUM_THREADS": "1"})
    cmd = [sys.executable, "-m", "collectives.launcher", "-np", str(ns.ranks),
           "--timeline", str(run_dir.resolve()) + os.sep, *opts, str(TRAIN_SCRIPT),
           "--scenario", ns.scenario, "--steps", str(steps)]
    return cmd, {**env, **extra_env}


def run_training(cmd, env) -> int:
    """Run the job in its own process group; kill the whole group on timeout or Ctrl+C."""
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    try:
        return proc.wait(timeout=TRAIN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        print(f"ringscope demo: training did not finish in {TRAIN_TIMEOUT_S}s; stopped it",
              file=sys.stderr)
        return 124
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        raise


def main(argv=None) -> int:
    """Entry point of ``ringscope demo``."""
    ns = parse(sys.argv[1:] if argv is None else argv)
    run_dir = Path(ns.out or f"ringscope-runs/demo-{ns.scenario}-{time.strftime('%Y%m%d-%H%M%S')}")
    err = prepare_run_dir(run_dir)
    if err:
        print(f"ringscope demo: {err}", file=sys.stderr)
        return 2
    cmd, env = train_command(ns, run_dir)
    print(f"ringscope demo: scenario {ns.scenario} on {ns.ranks} ranks{' (DDP)' if ns.ddp else ''}, "
          f"traces in {run_dir}/",
          flush=True)
    try:
        rc = run_training(cmd, env)
    except KeyboardInterrupt:
        return 130
    traces = sorted(run_dir.glob("rank-*.json"))
    if rc != 0:
        if ns.scenario == "hang":
            print("ringscope demo: the job stopped with the stall error, as this scenario intends "
                  "(see the STALL events and the missing rank in the summary)", flush=True)
        else:
            print(f"ringscope demo: training failed (exit status {rc})", file=sys.stderr)
    if not traces:
        print(f"ringscope demo: {run_dir}: no traces were written", file=sys.stderr)
        return 1
    print(f"ringscope demo: {len(traces)} trace file(s) in {run_dir}/\n", flush=True)
    from viewer.cli import summarize

    src = int(summarize.main([str(run_dir)]) or 0)
    if src != 0:
        return src
    if ns.no_view:
        return 0 if rc == 0 or ns.scenario == "hang" else 1
    from viewer.dashboard import serve

    try:
        return int(serve.main([str(run_dir), "--port", str(ns.port)]) or 0)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
