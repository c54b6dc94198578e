"""``python -m collectives.launcher -np N [options] COMMAND [args]``: run a command on N ranks.

COMMAND is what ``horovodrun`` takes: ``python train.py`` (any ``python``/``python3.X`` name means the
interpreter running this launcher, which has ringscope installed), ``python -m module`` or just
``-m module``, a path to an interpreter, an executable, or a bare ``train.py`` (run with this
interpreter). Runs through the mpiexec that sits next to this interpreter (the mpich wheel's), with the
RINGSCOPE_* environment the options ask for. Exits with mpiexec's status, which is non-zero when any
rank fails (a failing rank aborts the job, so the others never hang).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from collectives import cluster
from collectives.cluster import ClusterError
from collectives.elastic import driver


def mpiexec_path() -> str | None:
    cand = Path(sys.executable).parent / "mpiexec"
    if cand.exists():
        return str(cand)
    return shutil.which("mpiexec")


def parse(argv):
    p = argparse.ArgumentParser(prog="ringscope run",
                                description="Run a script on N MPI ranks with ringscope's settings.")
    p.add_argument("-np", "-n", dest="np", type=int, required=True, help="number of ranks")
    p.add_argument("-H", "--hosts", help="host:slots,... (passed to mpiexec -hosts; over ssh unless --cluster)")
    p.add_argument("--cluster", action="store_true",
                   help="launch on the hosts of `ringscope cluster up` (all of them unless -H names some)")
    p.add_argument("--timeline", help="write a per-rank timeline to this path")
    p.add_argument("--mark-cycles", action="store_true", help="record engine cycles in the timeline")
    p.add_argument("--fusion-threshold-mb", type=float, help="fusion threshold in MiB (0 disables)")
    p.add_argument("--cycle-time-ms", type=float, help="longest a cycle waits to gather work")
    p.add_argument("--backend", choices=("ring", "mpi", "nccl", "gloo"), help="collective backend")
    p.add_argument("--bind-to", choices=("none", "core"), default="none",
                   help="core: pin each rank to one core, round robin (mpiexec -bind-to core); "
                        "steadier step times on a shared host")
    p.add_argument("--hierarchical-allreduce", action="store_true",
                   help="ring/mpi: allreduce within each host, then across hosts, then within again")
    p.add_argument("--elastic", action="store_true",
                   help="elastic job: survive dead ranks and take new hosts (docs/ELASTIC.md)")
    p.add_argument("--min-np", type=int, help="elastic: fewest ranks to go on with (default -np)")
    p.add_argument("--max-np", type=int, help="elastic: most ranks to grow to (default unbounded)")
    p.add_argument("--host-discovery-script", metavar="S",
                   help="elastic: executable printing the usable host[:slots], one a line")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="what to run: script.py [args], python script.py [args], -m module [args], "
                        "or any executable [args]")
    opts, command = _split_options(p, list(argv))
    ns = p.parse_args(opts)
    ns.command = command
    if not command:
        p.error("the command to run is missing (e.g. python train.py)")
    if ns.np < 1:
        p.error("-np must be at least 1")
    _check_elastic(p, ns)
    for opt in ("fusion_threshold_mb", "cycle_time_ms"):
        val = getattr(ns, opt)
        if val is not None and val < 0:
            p.error(f"--{opt.replace('_', '-')} must be >= 0")
    return ns


def _check_elastic(p, ns) -> None:
    if not ns.elastic:
        for opt in ("min_np", "max_np", "host_discovery_script"):
            if getattr(ns, opt) is not None:
                p.error(f"--{opt.replace('_', '-')} needs --elastic")
        return
    if ns.min_np is None:
        ns.min_np = ns.np
    if ns.min_np < 1 or ns.min_np > ns.np:
        p.error("--min-np must be between 1 and -np")
    if ns.max_np is not None and ns.max_np < ns.np:
        p.error("--max-np must be at least -np")
    if ns.host_discovery_script and ns.hosts:
        p.error("give -H or --host-discovery-script, not both")
    if ns.timeline and not ns.timeline.endswith(("/", os.sep)) and Path(ns.timeline).is_file():
        p.error(f"--timeline {ns.timeline}: an elastic job writes a directory (gen-NNN/ per world)")


def _split_options(parser, argv):
    """``(launcher options, command)``: the command starts at the first word that is not one of
    the launcher's options or its value, or at ``-m`` (so ``-m mod --lr 3`` keeps ``--lr`` for the
    module rather than argparse rejecting it)."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "-m" or not word.startswith("-"):
            break
        action = parser._option_string_actions.get(word.split("=", 1)[0])
        if action is None:   # not ours: argparse names it as unrecognized
            return argv, []
        i += 1 if action.nargs == 0 or "=" in word else 2
    return argv[:i], argv[i:]


_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)*)?$")


class CommandError(ValueError):
    """The command line names nothing that can run."""


def command_line(words: list[str]) -> list[str]:
    """The per-rank argv for the user's command words (see the module docstring)."""
    first, rest = words[0], words[1:]
    if first == "-m":
        if not rest:
            raise CommandError("-m: the module name is missing")
        return [sys.executable, "-m", *rest]
    if os.sep not in first and _PYTHON_NAME.match(first):
        if rest and not rest[0].startswith("-") and not Path(rest[0]).is_file():
            raise CommandError(f"{rest[0]}: no such script")
        return [sys.executable, *rest]
    path = Path(first)
    if path.is_file():
        if path.suffix == ".py" or not os.access(path, os.X_OK):
            return [sys.executable, first, *rest]
        return [first, *rest]
    if path.suffix == ".py":
        raise CommandError(f"{first}: no such script")
    if os.sep not in first and shutil.which(first):
        return [first, *rest]
    raise CommandError(f"{first}: no such script or command")


def checkout_env(extra: dict | None = None, environ=None) -> dict:
    """The environment for a Python child that imports this checkout: its root first on
    PYTHONPATH, unbuffered output, then ``extra`` (a value of None removes that variable)."""
    env = dict(os.environ if environ is None else environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def run_job(cmd, env: dict, timeout: float, cwd=None) -> tuple[int | None, str]:
    """Run ``cmd`` in its own session with stdout and stderr captured together; returns (exit
    status, output). On a timeout the whole process group is killed, so no rank is left spinning,
    and the status is None."""
    proc = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out
    return proc.returncode, out


def build(ns, environ=None):
    """(command, environment) for the parsed options; :class:`CommandError` when the command
    names nothing that can run."""
    env = checkout_env(environ=environ)
    if ns.timeline:
        # keep a trailing "/": it is what marks a not-yet-existing directory (one file per rank)
        slash = "/" if ns.timeline.endswith(("/", os.sep)) else ""
        env["RINGSCOPE_TIMELINE"] = str(Path(ns.timeline).resolve()) + slash
    if ns.mark_cycles:
        env["RINGSCOPE_TIMELINE_MARK_CYCLES"] = "1"
    if ns.fusion_threshold_mb is not None:
        env["RINGSCOPE_FUSION_THRESHOLD"] = str(int(ns.fusion_threshold_mb * 1024 * 1024))
    if ns.cycle_time_ms is not None:
        env["RINGSCOPE_CYCLE_TIME"] = repr(ns.cycle_time_ms)
    if ns.backend:
        env["RINGSCOPE_BACKEND"] = ns.backend
    if ns.hierarchical_allreduce:
        env["RINGSCOPE_HIERARCHICAL_ALLREDUCE"] = "1"
    cmd = [mpiexec_path() or "mpiexec", "-n", str(ns.np)]
    if ns.cluster:
        hosts = cluster.check_hosts(ns.hosts)
        cmd += ["-launcher", "ssh", "-launcher-exec", str(cluster.LAUNCHER), "-hosts", hosts]
        env.update(cluster.MPI_ENV)
    elif ns.hosts:
        cmd += ["-hosts", ns.hosts]
    if ns.bind_to != "none":
        cmd += ["-bind-to", ns.bind_to]
    cmd += command_line(ns.command)
    return cmd, env


def main(argv=None) -> int:
    ns = parse(sys.argv[1:] if argv is None else argv)
    if mpiexec_path() is None:
        print("ringscope run: mpiexec not found (install the runtime extra: mpi4py + mpich)",
              file=sys.stderr)
        return 2
    if ns.elastic:
        try:
            build(ns)   # a bad command or cluster fails here, once, before any world starts
        except (CommandError, ClusterError) as exc:
            print(f"ringscope run: {exc}", file=sys.stderr)
            return 2
        return driver.run(ns, build)
    try:
        cmd, env = build(ns)
    except (CommandError, ClusterError) as exc:
        print(f"ringscope run: {exc}", file=sys.stderr)
        return 2
    try:
        proc = subprocess.run(cmd, env=env)
    except KeyboardInterrupt:
        return 130
    if proc.returncode != 0:
        print(f"ringscope run: the job failed (mpiexec exit status {proc.returncode})",
              file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
