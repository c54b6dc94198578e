"""A real CPU DDP job (torch gloo, 2 ranks, torch.profiler), run once per session."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.viewer.conftest import ROOT


@pytest.fixture(scope="session")
def ddp_run(tmp_path_factory):
    """Directory holding the two ranks' Kineto traces (tensorboard_trace_handler file names)."""
    pytest.importorskip("torch", reason="torch is not installed (pip install -e .[torch])")
    out = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", "tests.kineto.ddp_job", str(out), "--steps", "3"], cwd=ROOT,
                       capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    files = sorted(out.glob("*.pt.trace.json"))
    assert len(files) == 2, (files, p.stderr[-2000:])
    return out


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGSCOPE_CACHE_DIR", str(tmp_path / "_cache"))
