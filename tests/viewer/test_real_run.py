"""Analyses on a real 4-rank run of the runtime (mpiexec, numpy allreduces) with one slow rank."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mpi_util import run_mpi
from tests.viewer.conftest import ROOT
from viewer import Run

SCRIPT = Path(__file__).parent / "scripts" / "train_numpy.py"
SLOW = 2


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("realrun")
    (d / "trace").mkdir()
    proc = run_mpi(4, [SCRIPT], env={"RINGSCOPE_TIMELINE": str(d / "trace") + "/",
                                     "RINGSCOPE_TIMELINE_MARK_CYCLES": "1",
                                     "SLOW_RANK": SLOW, "SLOW_MS": 40, "STEPS": 4,
                                     "RINGSCOPE_CACHE_DIR": str(d / "cache")}, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:]
    files = sorted((d / "trace").glob("*.json"))
    assert len(files) == 4, files
    return d / "trace"


def test_loads_four_ranks(run_dir):
    run = Run.load(run_dir, cache=False)
    assert run.ranks["rank"].tolist() == [0, 1, 2, 3] and run.size == 4
    assert not run.ranks["truncated"].any()
    ops = run.tensor_ops
    assert len(ops) == 4 * 4 * 4 and ops["done_ns"].notna().all()
    assert (ops["submit_ns"] <= ops["negotiated_ns"]).all() and (ops["negotiated_ns"] <= ops["done_ns"]).all()
    assert set(ops["step"]) == {0, 1, 2, 3}
    # every fused op has a response id that all ranks share
    fo = run.fused_ops
    assert (fo["response"] >= 0).all() and fo.groupby("response")["rank"].nunique().eq(4).all()
    assert fo.groupby("rank")["count"].sum().eq(16).all()
    assert (fo["comm_ns"] > 0).all() and set(fo["activity"]) == {"RING_ALLREDUCE"}
    assert len(run.cycles) > 0


def test_straggler_found(run_dir):
    run = Run.load(run_dir, cache=False)
    st = run.stragglers()
    top = st.iloc[0]
    assert top["rank"] == SLOW and top["pct_last"] >= 75
    assert top["median_lateness_ns"] > 20e6  # slept 40 ms per step
    assert 20e6 < top["wait_imposed_per_step_ns"] < 200e6
    msgs = run.findings()["message"].tolist()
    assert any(m.startswith(f"rank {SLOW} was last in") for m in msgs), msgs


def test_breakdown_and_bandwidth(run_dir):
    run = Run.load(run_dir, cache=False)
    bd = run.breakdown_steps()
    assert len(bd) == 16
    others = bd[bd["rank"] != SLOW]["framework_wait_ns"].mean()
    assert others > bd[bd["rank"] == SLOW]["framework_wait_ns"].mean() + 20e6  # the others wait for it
    assert (bd["exposed_ns"] <= bd["in_flight_ns"]).all()
    bw = run.op_bandwidth()
    assert (bw["busbw_gbps"] > 0).all()
    assert (bw["busbw_gbps"] / bw["algbw_gbps"]).round(6).eq(1.5).all()  # 2(n-1)/n for n = 4


def _cut_inside_last_op(data: bytes) -> bytes:
    """The trace cut in the middle of the line after its last tensor lifecycle's begin (that op
    never ends on this rank; the rank dies mid-write). Format 3 writes a finished op as one X: the
    last one becomes the B the tracer writes for an op in flight at a flush."""
    lines = data.split(b"\n")
    last, begin = None, None
    for i, line in enumerate(lines):
        try:
            ev = json.loads(line.strip().rstrip(b","))
        except ValueError:
            continue
        if not isinstance(ev, dict):
            continue
        if (ev.get("ph") == "b" and not ev["name"].startswith("NEGOTIATE_") and ev["name"] != "QUEUE") or \
                (ev.get("ph") in ("B", "X") and ev.get("cat") == "tensor"):
            last, begin = i, ev
    assert last is not None and last + 1 < len(lines)
    if begin["ph"] == "X":
        del begin["dur"]
        lines[last] = json.dumps({**begin, "ph": "B"}, separators=(",", ":")).encode() + b","
    return b"\n".join(lines[:last + 1]) + b"\n" + lines[last + 1][: len(lines[last + 1]) // 2]


def test_truncated_real_trace(run_dir, tmp_path):
    for f in run_dir.glob("*.json"):
        data = f.read_bytes()
        (tmp_path / f.name).write_bytes(data if "00003" not in f.name else _cut_inside_last_op(data))
    run = Run.load(tmp_path, cache=False)
    assert run.meta["truncated_ranks"] == [3]
    assert run.hangs()["unfinished_ranks"].apply(lambda r: r == [3]).any()


def test_summarize_json_and_csv(run_dir, tmp_path):
    p = subprocess.run([sys.executable, "-m", "viewer.cli", "summarize", str(run_dir), "--json", "--csv",
                        str(tmp_path / "csv"), "--top", "3"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["schema"] == "ringscope.summary/1"
    assert set(data) >= {"run", "findings", "stragglers", "negotiations", "fusion", "tensor_sizes", "cycles",
                         "bandwidth", "alpha_beta", "breakdown", "hangs", "hangs_by_rank"}
    # 4 steps ran; the last has no STEP span (no mark_step after it), so 3 are timed
    assert data["run"]["size"] == 4 and data["run"]["steps"] == data["headline"]["steps"] == 3
    assert data["stragglers"][0]["rank"] == SLOW and len(data["stragglers"]) == 3
    assert data["findings"][0]["kind"] == "straggler"
    assert (tmp_path / "csv" / "stragglers.csv").exists() and (tmp_path / "csv" / "op_bandwidth.csv").exists()
    p = subprocess.run([sys.executable, "-m", "viewer.cli", "summarize", str(run_dir), "--full"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "Stragglers" in p.stdout and f"rank {SLOW} was last" in p.stdout
