"""Hosts in the analyses (issue 31): the intra/cross-host link split, the slow_link and late_host
findings. On the real 2 x 2 run with a 200 Mbit/s host link (sample_traces/two-hosts-slow-link), and
on runs written by the real recorder (tests/viewer/phase_runs.py) for the hierarchical sub-phases
and for a host whose ranks are late together."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from tests.viewer.phase_runs import write_run
from tests.viewer.test_sample_traces import _run
from viewer import Run
from viewer.analyses import links
from viewer.findings.ranks import late_host_rows

LINK_GBIT = 0.2   # the sample's tbf limit, each way (sample_traces/regenerate.sh RATE=200mbit)
TWO_BY_TWO = ["h0", "h0", "h1", "h1"]


def _finding(run, kind):
    f = run.findings()
    rows = f[f["kind"] == kind]
    return rows.iloc[0] if len(rows) else None


def test_ring_hops_follow_the_layout():
    assert links.ring_hops(TWO_BY_TWO) == (2, 2)
    assert links.ring_hops(["h0", "h1", "h0", "h1"]) == (0, 4)   # round-robin placement: every hop crosses
    assert links.ring_hops(["h0"] * 4) == (4, 0)


def test_slow_link_sample_split_sums_to_the_ring_traffic():
    run = _run("two-hosts-slow-link")
    assert dict(zip(run.ranks["rank"], run.ranks["host"])) == {0: "h0", 1: "h0", 2: "h1", 3: "h1"}
    ops = run.link_ops()
    assert set(ops["link"]) == {"intra", "cross"} and set(ops["algorithm"]) <= {"ring", "direct"}
    every = run.fused_ops[run.fused_ops["op"] == "ALLREDUCE"]["response"].nunique()
    assert ops["response"].nunique() == every   # every allreduce of the run is split
    for (_resp, algorithm), g in ops.groupby(["response", "algorithm"]):
        s, n = int(g["op_bytes"].iloc[0]), 4
        total = 2 * (n - 1) * s if algorithm == "ring" else n * (n - 1) * s
        assert g["traffic_bytes"].sum() == pytest.approx(total, abs=2)
        by = dict(zip(g["link"], g["traffic_bytes"]))
        # ring 0->1->2->3->0 on h0 = {0, 1}: two hops cross; direct: 8 of the 12 pairs cross
        assert by["cross"] == pytest.approx(by["intra"] if algorithm == "ring" else 2 * by["intra"], abs=2)
    sizes = run.links()
    assert sizes["traffic_bytes"].sum() == ops["traffic_bytes"].sum()
    big = sizes[(sizes["link"] == "cross") & (sizes["size_bytes"] >= 1 << 20)]
    # what the link measured is the tbf limit's (0.2 Gbit/s), not more, and not far below
    assert (big["busbw_gbps"] * 8).between(0.5 * LINK_GBIT, 1.05 * LINK_GBIT).all(), big


def test_slow_link_finding_names_busbw_share_and_hierarchical():
    run = _run("two-hosts-slow-link")
    f = _finding(run, "slow_link")
    assert f is not None, run.findings()
    msg = f["message"]
    gbit = float(re.search(r"ran at ([\d.]+) Gbit/s busbw", msg).group(1))
    cross = run.link_ops()[lambda d: d["link"] == "cross"]
    measured = 8 * (cross["busbw_gbps"] * cross["time_ns"]).sum() / cross["time_ns"].sum()
    assert gbit == pytest.approx(measured, abs=0.006) and gbit <= 1.05 * LINK_GBIT
    share = float(re.search(r"(\d+) % of the step", msg).group(1))
    assert share == pytest.approx(run.cross_link()["share_pct"].median(), abs=0.6) and share >= 40
    assert f["severity"] == "high"
    # large ops on a flat ring of 2 ranks per host: the hierarchical allreduce, and by how much
    assert "HIERARCHICAL_ALLREDUCE=1" in msg and "1.5x less" in msg and "FUSION_THRESHOLD" not in msg


@pytest.mark.parametrize("scenario", ["healthy", "straggler", "large-tensors", "slow-data", "cpu-contention"])
def test_one_host_samples_have_no_links_and_no_slow_link(scenario):
    run = _run(scenario)
    assert {run.why_not(n) for n in ("link_ops", "cross_link", "late_hosts")} == {"needs ranks on two or more hosts"}
    assert "slow_link" not in set(run.findings()["kind"])


def test_summary_json_has_links_and_hosts(capsys):
    from viewer.cli import summarize

    _run("two-hosts-slow-link")
    assert summarize.main(["sample_traces/two-hosts-slow-link", "--json", "--no-cache"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run"]["hosts"] == {"h0": [0, 1], "h1": [2, 3]}
    assert {r["link"] for r in data["links"]} == {"intra", "cross"}
    assert data["cross_link"] and all(r["share_pct"] > 40 for r in data["cross_link"])
    assert {r["host"] for r in data["stragglers"]} == {"h0", "h1"}
    assert data["findings"][0]["kind"] == "slow_link"


def test_hierarchical_sub_phases_split_and_bound_the_step(tmp_path):
    run = Run.load(write_run(tmp_path / "hier", steps=8, hosts=TWO_BY_TWO, cross_frac=0.8, comm_ms=30.0),
                   cache=False)
    ops = run.link_ops()
    assert set(ops["algorithm"]) == {"hierarchical"}
    s = int(ops["op_bytes"].iloc[0])
    for _, g in ops.groupby("response"):
        by = {(r["link"], r["phase"]): r["traffic_bytes"] for _, r in g.iterrows()}
        # reduce-scatter and allgather move (L-1) S in each host; the shards 2 (H-1) S across hosts
        assert by == {("intra", "INTRA_HOST_REDUCE"): 2 * s, ("intra", "INTRA_HOST_BROADCAST"): 2 * s,
                      ("cross", "CROSS_HOST_ALLREDUCE"): 2 * s}
    cross = ops[ops["link"] == "cross"]
    assert (cross["time_ns"] > 20e6).all()   # ~0.8 x 28 ms on the local roots
    cost = run.cross_link()
    assert list(cost["rank"]) == [0, 1, 2, 3]   # every rank carries a shard across
    assert (cost["share_pct"] >= 20).all()
    msg = _finding(run, "slow_link")["message"]
    # already hierarchical, one op a step: nothing to fuse, and not hierarchical allreduce again
    assert "HIERARCHICAL" not in msg and "the link itself is the limit" in msg and "CYCLE_TIME" not in msg


def test_fast_link_is_not_a_slow_link(tmp_path):
    run = Run.load(write_run(tmp_path / "flat", steps=8, hosts=TWO_BY_TWO, comm_ms=1.0), cache=False)
    ops = run.link_ops()
    assert set(ops["algorithm"]) == {"direct"} and set(ops["link"]) == {"intra", "cross"}
    assert (run.cross_link()["share_pct"] < 10).all()
    assert _finding(run, "slow_link") is None


def test_late_host_named_once_instead_of_its_ranks(tmp_path):
    run = Run.load(write_run(tmp_path / "late", steps=12, hosts=TWO_BY_TWO,
                             slow={2: {"data_wait": 12.0}, 3: {"data_wait": 12.0}}), cache=False)
    lh = run.late_hosts()
    assert list(lh["host"]) == ["h1"] and list(lh.iloc[0]["ranks"]) == [2, 3]
    assert lh.iloc[0]["pct_last"] >= 90 and lh.iloc[0]["median_lead_ns"] > 5e6
    f = _finding(run, "late_host")
    assert "host h1 (ranks 2, 3)" in f["message"] and "the other hosts' ranks were not" in f["message"]
    assert f["severity"] == "high"
    # no rank of h1 blamed on its own
    strag = run.findings()[lambda d: d["kind"] == "straggler"]["message"].tolist()
    assert not any(m.startswith(("rank 2 ", "rank 3 ")) for m in strag), strag


def test_one_late_rank_is_a_straggler_not_a_late_host(tmp_path):
    run = Run.load(write_run(tmp_path / "rank", steps=12, hosts=TWO_BY_TWO, slow={2: {"data_wait": 12.0}}),
                   cache=False)
    assert run.late_hosts().empty and _finding(run, "late_host") is None
    assert _finding(run, "straggler")["message"].startswith("rank 2 was last in")


def test_same_delay_on_one_host_run_is_no_late_host(tmp_path):
    run = Run.load(write_run(tmp_path / "one", steps=12, slow={2: {"data_wait": 12.0}, 3: {"data_wait": 12.0}}),
                   cache=False)
    assert run.why_not("late_hosts") == "needs ranks on two or more hosts"
    assert "late_host" not in set(run.findings()["kind"])


def test_late_host_within_clock_uncertainty_says_so():
    row = {"host": "h1", "ranks": [2, 3], "negotiations": 30, "times_last": 27, "pct_last": 90.0,
           "wait_imposed_ns": 3_000_000, "per_step_ns": 300_000.0, "share_pct": 12.0, "median_lead_ns": 250_000.0,
           "clock_uncertainty_ns": 200_000, "steps": 10}
    (f,) = late_host_rows(pd.DataFrame([row]))
    assert "clock-offset uncertainty (±200 µs)" in f["message"] and f["severity"] == "medium"
    (g,) = late_host_rows(pd.DataFrame([{**row, "clock_uncertainty_ns": 20_000}]))
    assert "clock" not in g["message"] and g["severity"] == "high"


def _ops(n_ops, op_bytes, time_ns, steps=4):
    return pd.DataFrame([{"response": i, "step": i % steps, "op_bytes": op_bytes, "link": "cross",
                          "algorithm": "ring", "phase": "RING_ALLREDUCE", "ranks": 4, "hosts": 2,
                          "traffic_bytes": 3 * op_bytes, "time_ns": time_ns,
                          "busbw_gbps": 1.5 * op_bytes / time_ns} for i in range(n_ops)])


def test_slow_link_remedy_follows_the_figures():
    from viewer.findings.runtime import slow_link_rows

    cost = pd.DataFrame({"rank": [0, 1], "host": ["h0", "h1"], "steps": [4, 4], "step_ns": [1e8, 1e8],
                         "cross_ns": [5e7, 5e7], "exposed_cross_ns": [4.5e7, 4.5e7], "share_pct": [45.0, 45.0]})
    fus = pd.DataFrame([{"threshold": 64 << 10, "full_pct": 60.0, "median_fill": 0.95}])
    # 10 small ops a step: fuse them; the threshold when ops fill it, else the cycle time
    (f,) = slow_link_rows(_ops(40, 60_000, 1_000_000), cost, fus)
    assert "10 ops per step under 1 MiB" in f["message"] and "raise RINGSCOPE_FUSION_THRESHOLD" in f["message"]
    (f,) = slow_link_rows(_ops(40, 60_000, 1_000_000), cost, fus.assign(full_pct=0.0, median_fill=0.01),
                              prefix="HOROVOD_")
    assert "raise HOROVOD_CYCLE_TIME" in f["message"] and "FUSION_THRESHOLD" not in f["message"]
    # large ops on a flat ring of 2 ranks per host: hierarchical; already hierarchical: the link itself
    (f,) = slow_link_rows(_ops(4, 64 << 20, 500_000_000), cost, fus)
    assert "HIERARCHICAL_ALLREDUCE=1" in f["message"] and "45 % of the step" in f["message"]
    (f,) = slow_link_rows(_ops(4, 64 << 20, 500_000_000), cost, fus, hierarchical=True)
    assert "the link itself is the limit" in f["message"]
    assert slow_link_rows(_ops(4, 64 << 20, 500_000_000), cost.assign(share_pct=12.0), fus) == []


def test_late_host_ranks_get_no_imbalance_finding_either(tmp_path):
    run = Run.load(write_run(tmp_path / "late", steps=12, hosts=TWO_BY_TWO,
                             slow={2: {"data_wait": 12.0}, 3: {"data_wait": 12.0}}), cache=False)
    kinds = run.findings()["kind"].tolist()
    assert kinds.count("late_host") == 1 and "phase_imbalance" not in kinds
    msg = _finding(run, "late_host")["message"]
    assert "rank 2: its data wait" in msg and "rank 3: its data wait" in msg


def test_hierarchical_gain_follows_the_ring_layout():
    from viewer.findings.runtime import slow_link_rows

    cost = pd.DataFrame({"rank": [0], "host": ["h0"], "steps": [4], "step_ns": [1e8], "cross_ns": [6e7],
                         "exposed_cross_ns": [5e7], "share_pct": [50.0]})
    # round-robin placement: all four hops cross, each host's link carries 3x the buffer
    ops = _ops(4, 64 << 20, 500_000_000).assign(traffic_bytes=4 * 1.5 * (64 << 20))
    (f,) = slow_link_rows(ops, cost)
    assert "instead of 3x (3x less)" in f["message"]


def test_covered_before_matches_clipping_each_window():
    import random

    import numpy as np

    from viewer.analyses import intervals

    rnd = random.Random(3)
    spans = [(s, s + rnd.randint(1, 50)) for s in (rnd.randint(0, 1000) for _ in range(60))]
    merged = intervals.merge(spans)
    windows = [(a, a + rnd.randint(0, 200)) for a in (rnd.randint(-50, 1100) for _ in range(40))]
    w0, w1 = (np.array(w) for w in zip(*windows))
    got = intervals.covered_before(merged, w1) - intervals.covered_before(merged, w0)
    want = [intervals.length((max(s, a), min(e, b)) for s, e in merged) for a, b in windows]
    assert got.tolist() == want
    assert intervals.length(intervals.intersection(spans, windows)) == intervals.intersection_length(spans, windows)
