"""Driver side: start a measuring script (under mpiexec or as a plain subprocess) and read its JSON.

Workers print exactly one line ``BENCH_JSON {...}`` (rank 0 only for MPI jobs); everything else on
stdout/stderr is kept for the error message when the job fails.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "BENCH_JSON "


class BenchError(RuntimeError):
    """A measuring job failed; the message says which and shows the tail of its output."""


def mpiexec() -> str:
    """The mpiexec next to this interpreter (the mpich wheel's), as ``ringscope run`` uses it."""
    from collectives.launcher import mpiexec_path
    return mpiexec_path() or "mpiexec"


def env_with(extra: dict | None = None) -> dict:
    """The launcher's environment for this checkout, plus ``extra`` (None removes a variable)."""
    from collectives.launcher import checkout_env
    return checkout_env(extra)


def run_text(cmd: list[str], timeout: float, env: dict | None = None, label: str = "") -> str:
    """Run ``cmd`` in its own session; return its output (stdout + stderr). Raises
    :class:`BenchError` on a non-zero exit or a timeout (the whole process group is killed then,
    so no rank is left spinning)."""
    from collectives.launcher import run_job
    label = label or cmd[0]
    rc, out = run_job(cmd, env_with(env), timeout, cwd=ROOT)
    if rc is None:
        raise BenchError(f"{label}: timed out after {timeout:.0f}s\n{_tail(out)}")
    if rc != 0:
        raise BenchError(f"{label}: exit {rc}\n{_tail(out)}")
    return out


def run_json(cmd: list[str], timeout: float, env: dict | None = None, label: str = "") -> dict:
    """Run ``cmd`` (see :func:`run_text`); return the payload of its ``BENCH_JSON`` line."""
    out = run_text(cmd, timeout, env, label)
    payload = None
    for line in out.splitlines():
        if line.startswith(MARK):
            payload = json.loads(line[len(MARK):])
    if payload is None:
        raise BenchError(f"{label or cmd[0]}: no result line\n{_tail(out)}")
    return payload


def run_mpi_json(n: int, script: str, args: list[str], timeout: float,
                 env: dict | None = None) -> dict:
    """``mpiexec -n N python bench/<script> args...``; the payload rank 0 printed."""
    cmd = [mpiexec(), "-n", str(n), sys.executable, str(ROOT / "bench" / script), *map(str, args)]
    return run_json(cmd, timeout, env, label=f"{script} on {n} ranks")


def run_py_json(script: str, args: list[str], timeout: float, env: dict | None = None) -> dict:
    """``python bench/<script> args...`` (or a path outside bench/); its payload."""
    path = Path(script) if os.path.isabs(script) else ROOT / "bench" / script
    return run_json([sys.executable, str(path), *map(str, args)], timeout, env, label=path.name)


def emit(payload: dict) -> None:
    """Worker side: print the one result line."""
    print(MARK + json.dumps(payload), flush=True)


def _tail(out: str, n: int = 3000) -> str:
    return out[-n:] if out else "(no output)"
