"""HTA itself as the reference: HolisticTraceAnalysis run on the shared Kineto traces by its own
interpreter (``$RINGSCOPE_HTA_PYTHON``, a virtualenv with ``pip install HolisticTraceAnalysis``; never a
dependency of ringscope), its overlap and temporal breakdown against ours within 0.5 points."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.viewer.conftest import ROOT

SHARED = ROOT.parent / "shared" / "kineto_traces"
HTA_PYTHON = os.environ.get("RINGSCOPE_HTA_PYTHON")


@pytest.mark.parametrize("name", ["pair_128rank_job", "nccl_2rank", "single_rank"])
def test_figures_agree_with_hta_run_here(name):
    if not HTA_PYTHON:
        pytest.skip("RINGSCOPE_HTA_PYTHON is not set (a python with HolisticTraceAnalysis installed)")
    if not (SHARED / name).exists():
        pytest.skip(f"real Kineto traces not present at {SHARED} (../shared is absent)")
    p = subprocess.run([HTA_PYTHON, str(ROOT / "bench" / "kineto_hta_probe.py"), str(SHARED / name), "--figures"],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": ""})
    line = [x for x in p.stdout.splitlines() if x.startswith("BENCH_JSON ")]
    assert p.returncode == 0 and line, p.stderr[-2000:]
    hta = json.loads(line[-1][len("BENCH_JSON "):])
    from viewer.run import Run

    run = Run.load(SHARED / name)
    tb = run.kineto_temporal().set_index("rank")
    ov = run.kineto_overlap().set_index("rank")
    for rank, (compute, non_compute, idle) in hta["temporal_pct"].items():
        got = tb.loc[int(rank)]
        assert abs(got["compute_pct"] - compute) <= 0.5 and abs(got["non_compute_pct"] - non_compute) <= 0.5
        assert abs(got["idle_pct"] - idle) <= 0.5, (name, rank, got, hta)
    for rank, pct in hta["overlap_pct"].items():
        if pct == pct:   # NaN when the rank ran no NCCL kernel
            assert abs(ov.loc[int(rank), "overlap_pct"] - pct) <= 0.5, (name, rank, ov.loc[int(rank)], pct)
