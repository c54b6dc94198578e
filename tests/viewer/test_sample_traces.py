"""The committed sample traces (real runs, sample_traces/regenerate.sh): the analyses find what each
scenario planted."""
from __future__ import annotations

import pytest

from tests.viewer.conftest import SAMPLES
from viewer import Run


def _run(scenario):
    d = SAMPLES / scenario
    if not d.is_dir() or not any(f.name.endswith((".json", ".json.gz")) for f in d.iterdir()):
        pytest.skip(f"sample_traces/{scenario} is empty: run `bash sample_traces/regenerate.sh {scenario}`")
    return Run.load(d, cache=False)


def _kinds(run):
    return set(run.findings()["kind"])


def test_healthy():
    run = _run("healthy")
    assert run.size == 4 and len(run.ranks) == 4
    assert run.tensor_ops["done_ns"].notna().all()
    assert run.hangs().query("kind == 'missing'").empty
    assert "straggler" not in _kinds(run) and "hang" not in _kinds(run)


def test_straggler_rank_found():
    run = _run("straggler")
    st = run.stragglers()
    top = st.iloc[0]
    assert top["pct_last"] >= 60 and top["wait_imposed_ns"] > 2 * st.iloc[1]["wait_imposed_ns"]
    msgs = run.findings()["message"].tolist()
    assert any(m.startswith(f"rank {int(top['rank'])} was last in") for m in msgs), msgs


def test_tiny_tensors_starve_fusion():
    run = _run("tiny-tensors")
    from viewer.analyses import fusion

    s = fusion.fusion_summary(run.fusion()).iloc[0]
    assert s["median_bytes"] < 64 * 1024
    assert s["median_fill"] < 0.05
    assert run.tensor_sizes()["bucket_hi"].max() <= 1 << 20


def test_large_tensors_are_bandwidth_bound():
    run = _run("large-tensors")
    bw = run.bandwidth_by_size()
    assert bw["size_bytes"].max() >= 1 << 20
    bd = run.breakdown()
    assert bd["comm_ns"].sum() > bd["queue_ns"].sum()


def test_hang_missing_rank():
    run = _run("hang")
    from viewer.analyses import hangs

    h = run.hangs()
    missing = h[h["kind"] == "missing"]
    assert len(missing) >= 1
    by_rank = hangs.hangs_by_rank(h)
    assert len(by_rank) == 1  # exactly one rank never submitted
    assert "hang" in _kinds(run)
