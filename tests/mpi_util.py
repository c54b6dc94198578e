"""Launch real MPI jobs from tests (the venv's mpiexec from the mpich wheel).

Pattern for sharing one launch across many checks: a worker script under ``tests/mpi_scripts/`` runs
many named checks and each rank writes ``{check: {"ok": bool, "detail": str}}`` to
``$RESULTS_DIR/rank-<r>.json`` (see :func:`write_results`); a module-scoped fixture calls
:func:`run_suite` once and each test asserts one check on every rank.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).resolve().parent / "mpi_scripts"


def mpiexec() -> str:
    """The mpiexec next to this interpreter (the mpich wheel's), as ``ringscope run`` uses it."""
    from collectives.launcher import mpiexec_path
    return mpiexec_path() or "mpiexec"


def mpi_env(extra: dict | None = None) -> dict:
    """The launcher's environment for this checkout, plus ``extra``."""
    from collectives.launcher import checkout_env
    env = checkout_env(extra)
    env.setdefault("RINGSCOPE_DISABLE_NVTX", "")
    return env


def run_mpi(n: int, argv: list[str], env: dict | None = None, timeout: float = 180,
            cwd: Path | str = ROOT) -> subprocess.CompletedProcess:
    """Run ``mpiexec -n N python argv...``; on timeout kill the whole job and fail loudly."""
    from collectives.launcher import run_job
    cmd = [mpiexec(), "-n", str(n), sys.executable, *map(str, argv)]
    rc, out = run_job(cmd, mpi_env(env), timeout, cwd=cwd)
    if rc is None:
        raise AssertionError(f"MPI job timed out after {timeout}s: {' '.join(cmd)}\n{out[-4000:]}")
    return subprocess.CompletedProcess(cmd, rc, out, "")


def run_suite(n: int, script: str, results_dir: Path, env: dict | None = None,
              timeout: float = 300, args: list[str] = ()) -> dict[int, dict]:
    """Run one worker script on N ranks once; return {rank: {check: result}}."""
    results_dir.mkdir(parents=True, exist_ok=True)
    e = dict(env or {})
    e["RESULTS_DIR"] = str(results_dir)
    proc = run_mpi(n, [SCRIPTS / script, *args], env=e, timeout=timeout)
    results = {}
    for r in range(n):
        f = results_dir / f"rank-{r}.json"
        if f.exists():
            results[r] = json.loads(f.read_text())
    if proc.returncode != 0 or len(results) != n:
        raise AssertionError(f"{script} on {n} ranks exited {proc.returncode}, "
                             f"{len(results)} result files\n{proc.stdout[-6000:]}")
    return results


def run_checks(checks) -> dict:
    """Called by worker scripts: run each check (a detail string on failure, None when it passed,
    or it raises) and return this rank's results for :func:`write_results`."""
    import time
    import traceback

    results = {}
    for fn in checks:
        t0 = time.perf_counter()
        try:
            bad = fn()
            results[fn.__name__] = {"ok": not bad, "detail": bad or "",
                                    "seconds": round(time.perf_counter() - t0, 3)}
        except Exception as exc:  # record and move on; a stall error ends the job instead
            results[fn.__name__] = {"ok": False, "detail": "".join(
                traceback.format_exception_only(type(exc), exc)).strip()[-1500:]}
    return results


def write_results(results: dict) -> None:
    """Called by worker scripts: write this rank's check results to $RESULTS_DIR."""
    from mpi4py import MPI
    d = Path(os.environ["RESULTS_DIR"])
    (d / f"rank-{MPI.COMM_WORLD.rank}.json").write_text(json.dumps(results, default=str))


def assert_check(results: dict[int, dict], check: str) -> None:
    """Assert that ``check`` ran and passed on every rank."""
    bad = []
    for r, res in sorted(results.items()):
        got = res.get(check)
        if got is None:
            bad.append(f"rank {r}: check not run")
        elif not got.get("ok"):
            bad.append(f"rank {r}: {got.get('detail')}")
    assert not bad, f"{check}: " + "; ".join(bad)
