"""The parse stage on a Dask cluster (viewer/parse_dask.py) writes the store the local parse writes."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

# imported, not importorskip'd: CI installs the cluster extra (scripts/bootstrap.sh), so a missing engine fails here
from distributed import LocalCluster

from tests.viewer.conftest import ROOT, SAMPLES


def _summarize(cwd, cache_dir, *extra) -> subprocess.Popen:
    """``summarize run`` from ``cwd``: paths relative to a directory the workers are not in."""
    return subprocess.Popen([sys.executable, "-m", "viewer.cli", "summarize", "run", "--json", "--cache-dir", cache_dir,
                             *extra], cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_summarize_on_a_dask_cluster_writes_the_same_store(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "straggler", run, ignore=shutil.ignore_patterns(".*"))
    # a file the cluster reports and leaves out, as the local parse does
    (run / "rank-00009.json").write_text('{"traceEvents": 5}')
    here = _summarize(tmp_path, "here")   # while the cluster starts
    # workers as threads of this process (in another directory): the summarize is another process, so its tasks,
    # their answers and the store's files still cross processes over TCP and the disk, as on a real cluster (and it
    # is cheaper than worker processes)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                      host="127.0.0.1", dashboard_address=None) as cluster:
        there = _summarize(tmp_path, "there", "--scheduler", cluster.scheduler_address).communicate(timeout=120)
    here = here.communicate(timeout=120)
    assert there[0] == here[0] and '"verdict"' in here[0], there[1]
    assert "rank-00009.json: wrong shape" in there[1] and there[1] == here[1]
    (a,), (b,) = (tmp_path / "here").iterdir(), (tmp_path / "there").iterdir()
    files = sorted(p.name for p in a.iterdir())
    # 4 ranks' tables and info, the run's 6 tables and its info
    assert files == sorted(p.name for p in b.iterdir()) and len(files) == 4 * 6 + 6 + 1
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
