"""One real 2-rank ringscope run (mpiexec, the runtime, the tracer) per test session, and synthetic
Nsight exports built from its traces by :mod:`tests.nsys.fixture`."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.mpi_util import run_mpi

JOB = Path(__file__).with_name("allreduce_job.py")


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("nsys_run")
    env = {"RINGSCOPE_TIMELINE": f"{d}/", "RINGSCOPE_FUSION_THRESHOLD": str(512 * 1024),
           "RINGSCOPE_BACKEND": "ring"}
    proc = run_mpi(2, [JOB], env=env, timeout=180)
    assert proc.returncode == 0, f"the 2-rank job failed:\n{proc.stdout[-4000:]}"
    return d


@pytest.fixture(scope="session")
def trace_files(run_dir) -> list[Path]:
    from viewer.loader import find_traces

    files = find_traces(run_dir)
    assert len(files) == 2, files
    return files


@pytest.fixture(scope="session")
def run(run_dir):
    from viewer import Run

    return Run.load(run_dir, cache=False)


@pytest.fixture(scope="session")
def per_rank(trace_files, tmp_path_factory):
    """(truth, directory) of one synthetic export per rank, each with its own clock error."""
    from tests.nsys import fixture

    d = tmp_path_factory.mktemp("nsys_per_rank")
    return fixture.build(trace_files, d), d


@pytest.fixture(scope="session")
def combined(trace_files, tmp_path_factory):
    """(truth, path) of one synthetic export holding both ranks' processes."""
    from tests.nsys import fixture

    p = tmp_path_factory.mktemp("nsys_combined") / "report.sqlite"
    return fixture.build(trace_files, p, combined=True, clock_error_ns=-2_718_281), p


@pytest.fixture(scope="session")
def overlay(run, per_rank):
    from viewer.nsys.attach import attach_nsys

    truth, _ = per_rank
    return attach_nsys(run.tables, sorted(set(truth.files.values())))
