"""A real CPU DDP job (torch gloo, 2 ranks, torch.profiler), run once per session."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.viewer.conftest import ROOT


def ddp_job(out, *args: str):
    """Run ``tests.kineto.ddp_job`` into ``out`` (3 steps, ``args`` added); ``out`` then holds the two
    ranks' Kineto traces (tensorboard_trace_handler file names)."""
    pytest.importorskip("torch", reason="torch is not installed (pip install -e .[torch])")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", "tests.kineto.ddp_job", str(out), "--steps", "3", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    files = sorted(out.glob("*.pt.trace.json"))
    assert len(files) == 2, (files, p.stderr[-2000:])
    return out


@pytest.fixture(scope="session")
def ddp_run(tmp_path_factory):
    """Directory holding the two ranks' Kineto traces."""
    return ddp_job(tmp_path_factory.mktemp("ddp"))


@pytest.fixture(scope="session")
def late_ddp_run(tmp_path_factory):
    """The same job with rank 1 sleeping 20 ms before each collective it launches."""
    return ddp_job(tmp_path_factory.mktemp("ddp_late"), "--late-rank", "1", "--late-ms", "20")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGSCOPE_CACHE_DIR", str(tmp_path / "_cache"))
