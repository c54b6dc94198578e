"""The committed sample traces (real runs, sample_traces/regenerate.sh): the analyses find what each
scenario planted."""
from __future__ import annotations

import json
import os
import subprocess
import sys

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
    assert run.hangs().empty and not run.ranks["truncated"].any()
    assert "hang" not in _kinds(run) and not run.tensor_ops["error"].notna().any()
    # on a shared 2-core machine some rank is always a little late; the planted straggler is far later
    planted = _run("straggler").stragglers().iloc[0]["median_lateness_ns"]
    assert run.stragglers()["median_lateness_ns"].max() < planted / 2


def test_straggler_rank_found():
    run = _run("straggler")
    st = run.stragglers()
    top = st.iloc[0]
    assert top["pct_last"] >= 60 and top["wait_imposed_ns"] > 2 * st.iloc[1]["wait_imposed_ns"]
    msgs = run.findings()["message"].tolist()
    assert any(m.startswith(f"rank {int(top['rank'])} was last in") for m in msgs), msgs


def test_ddp_straggler_found_in_ddps_words():
    """torch's DDP (gloo, torchrun, watched): the planted rank (the last) is named by its buckets, its
    lateness put down to time no phase covers (the planted sleep between steps), and no finding gives
    the runtime's advice."""
    run = _run("ddp-straggler")
    assert run.meta["source"] == "ddp" and "ddp" in run.has
    top = run.stragglers().iloc[0]
    assert int(top["rank"]) == run.size - 1 and top["pct_last"] >= 60
    f = run.findings().set_index("kind")
    msg = f.loc["straggler", "message"]
    assert f"rank {run.size - 1} was the last to have its bucket ready" in msg and "untraced time" in msg
    assert set(f.index) <= {"straggler", "reduction_exposed", "bucket_cap_small", "core_sharing"}, set(f.index)
    # the ranks are bound two to a core: said once, at info, and no phase of ranks 0-2 blamed on them
    assert f.loc["core_sharing", "title"] == "ranks 0 and 1 share CPU 0; ranks 2 and 3 share CPU 1"
    assert f.loc["core_sharing", "severity"] == "info"


def test_tiny_tensors_starve_fusion():
    run = _run("tiny-tensors")
    from viewer.analyses import fusion

    fill = run.fusion_ops()
    s = fusion.fusion_summary(fill[fill["op"] == "ALLREDUCE"]).iloc[0]
    grads = run.tensor_ops[run.tensor_ops["op"] == "ALLREDUCE"]
    assert grads["bytes"].median() <= 16 * 1024  # many tiny gradients ...
    assert s["median_bytes"] <= s["threshold"] <= 1 << 20  # ... fused into ops capped by a small threshold
    assert s["median_fill"] >= 0.5 and s["full_pct"] >= 25
    assert {"fusion_threshold", "fusion_starved"} & _kinds(run)


def test_large_tensors_are_bandwidth_bound():
    run = _run("large-tensors")
    bw = run.bandwidth()
    assert bw["size_bytes"].max() >= 1 << 20
    bd = run.breakdown_steps()
    assert bd["comm_ns"].sum() > bd["queue_ns"].sum()


def test_hang_missing_rank():
    run = _run("hang")
    from viewer.analyses import hangs

    h = run.hangs()
    missing = h[h["kind"] == "missing"].sort_values("first_submit_ns")
    assert len(missing) >= 1
    first = missing.iloc[0]
    assert len(first["missing_ranks"]) == 1  # one rank never submitted the first stuck tensor
    culprit = first["missing_ranks"][0]
    assert sorted(first["submitted_ranks"] + [culprit]) == list(range(run.size))
    by_rank = hangs.hangs_by_rank(h)
    assert by_rank.iloc[0]["rank"] == culprit
    # the hung job was killed: no rank closed its trace, and the summary says so
    assert run.ranks["truncated"].all() and "truncated" in _kinds(run)
    msgs = run.findings()["message"].tolist()
    assert any(m.startswith(f"rank {culprit} never submitted {first['tensor']}") for m in msgs), msgs


@pytest.mark.parametrize("scenario, table", [("straggler", "Stragglers"), ("tiny-tensors", "Fusion (allreduce)"),
                                             ("two-hosts-slow-link", "Links"), ("elastic", "Recoveries")])
def test_summarize_leads_with_the_verdict_and_one_table(scenario, table):
    """The default: the verdict first, then the headline, the findings' titles, the table that shows the top
    finding and the pointer to --full; --full adds the facts, each finding's detail and every table."""
    short = _summarize(scenario)
    full = _summarize(scenario, "--full")
    data = _summarize_json(scenario)
    lines = short.splitlines()
    assert lines[0].startswith(data["headline"]["verdict"].split(":")[0])
    for i, f in enumerate(data["findings"], 1):
        assert f"{i}. {f['severity']} {f['title']}".split(" (")[0][:60] in " ".join(short.split())
    assert short.count("┏") + short.count("┌") == 1 and table in short
    assert "summarize --full" in lines[-1] or "summarize --full" in " ".join(lines[-2:])
    assert "Findings" in full and "Run" in full and full.count("┏") + full.count("┌") >= 4
    assert len(full.splitlines()) > 2 * len(lines)


def _summarize(scenario, *args) -> str:
    env = {**os.environ, "COLUMNS": "100"}
    p = subprocess.run([sys.executable, "-m", "viewer.cli", "summarize", str(SAMPLES / scenario), *args],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def _summarize_json(scenario) -> dict:
    return json.loads(_summarize(scenario, "--json"))
