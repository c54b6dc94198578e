"""Straggler root cause and critical path on runs written by the real recorder (tests/viewer/phase_runs.py),
with noise in every phase, and through the CLI (JSON, CSV, the rich tables)."""
from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from tests.viewer.conftest import ROOT
from tests.viewer.phase_runs import MS, write_run
from viewer import Run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("phase_runs")
    return {
        "slow-data": write_run(d / "slow-data", slow={2: {"data_wait": 40}}, noise=0.15, seed=1),
        "cpu-contention": write_run(d / "cpu", slow={1: {"forward": 5, "backward": 10}}, noise=0.15, seed=2,
                                    counters={1: {"cpu_pct": 50.0}}),
        "healthy": write_run(d / "healthy", noise=0.15, seed=3),
        "no-phases": write_run(d / "no-phases", slow={2: {"data_wait": 40}}, phases=False, seed=4),
        "untraced": write_run(d / "untraced", gap_ms={3: 25}, noise=0.15, seed=5),
        # rank 0 is the late one (untraced work); rank 2's loader is slow too, hidden behind rank 0
        "hidden": write_run(d / "hidden", gap_ms={0: 30}, slow={2: {"data_wait": 8}}, noise=0.15, seed=6),
        "noisy": write_run(d / "noisy", noise=0.4, seed=8),
    }


def _cause(run, rank):
    rc = run.root_cause()
    assert rc["rank"].tolist() == [rank], rc
    assert rc["late"].all()
    return rc.iloc[0]


def test_slow_data_names_data_wait(runs):
    run = Run.load(runs["slow-data"], cache=False)
    c = _cause(run, 2)
    assert c["cause"] == "data_wait_ns" and c["explained_by"] == "data wait"
    assert 34 * MS < c["data_wait_excess_ns"] < 46 * MS
    assert 80 <= c["share_pct"] <= 120
    assert abs(c["forward_excess_ns"]) < 2 * MS and abs(c["backward_excess_ns"]) < 4 * MS
    msg = run.findings()["message"].iloc[0]
    assert msg.startswith("rank 2 was last in") and "its data wait is" in msg and "loader workers" in msg
    assert "storage" in msg


def test_cpu_contention_names_compute_with_counters(runs):
    run = Run.load(runs["cpu-contention"], cache=False)
    c = _cause(run, 1)
    assert c["cause"] == "backward_ns" and c["explained_by"] == "backward, forward"
    assert 6 * MS < c["backward_excess_ns"] < 14 * MS and 2 * MS < c["forward_excess_ns"] < 8 * MS
    assert abs(c["data_wait_excess_ns"]) < 1 * MS
    assert [d["counter"] for d in c["counters"]] == ["cpu_pct"]
    assert c["counters"][0]["rank_value"] < 60 < 85 < c["counters"][0]["others_value"]
    msg = run.findings()["message"].iloc[0]
    assert "compute contention" in msg and "cpu_pct" in msg and "rank 1" in msg


@pytest.mark.parametrize("name", ["healthy", "noisy"])
def test_healthy_names_no_cause(runs, name):
    run = Run.load(runs[name], cache=False)
    assert run.root_cause().empty and run.late_ranks().empty
    assert not {"straggler", "phase_imbalance"} & set(run.findings()["kind"])


def test_a_slow_phase_hidden_behind_another_late_rank_is_named(runs):
    run = Run.load(runs["hidden"], cache=False)
    rc = run.root_cause().set_index("rank")
    assert sorted(rc.index) == [0, 2]
    assert rc.loc[0, "late"] and rc.loc[0, "cause"] == "unexplained"
    assert not rc.loc[2, "late"] and rc.loc[2, "cause"] == "data_wait_ns"
    assert 6 * MS < rc.loc[2, "data_wait_excess_ns"] < 10 * MS
    found = run.findings()
    msg = found[found["kind"] == "phase_imbalance"]["message"].tolist()
    assert len(msg) == 1 and msg[0].startswith("rank 2's data wait is") and "loader workers" in msg[0]


def test_no_phases_says_unknown(runs):
    run = Run.load(runs["no-phases"], cache=False)
    c = _cause(run, 2)
    assert c["cause"] == "unknown" and not c["phases_known"] and c["excess_ns"] == 0
    assert "phases are unknown" in c["message"] and "wrap_loader" in c["message"]
    assert "data wait" not in c["message"]


def test_untraced_lateness_is_unexplained(runs):
    run = Run.load(runs["untraced"], cache=False)
    c = _cause(run, 3)
    assert c["cause"] == "unexplained" and c["explained_by"] == ""
    assert 20 * MS < c["other_excess_ns"] < 30 * MS
    assert "no phase explains" in c["message"] and "hvd.timeline.region" in c["message"]
    assert "no system counter differs" in c["message"]


def test_untraced_time_that_grew_more_than_a_phase_is_the_cause(tmp_path):
    """Rank 3 sleeps 30 ms where no phase covers it, and its backward is 10 ms longer too (as on a loaded
    host): the backward explains a quarter of the lateness, but the untraced time grew more."""
    run = Run.load(write_run(tmp_path / "run", gap_ms={3: 30}, slow={3: {"backward": 10}}, noise=0.05, seed=9),
                   cache=False)
    c = _cause(run, 3)
    assert 0.25 * c["lateness_ns"] < c["backward_excess_ns"] < c["other_excess_ns"]
    assert c["cause"] == "unexplained" and c["explained_by"] == ""
    assert "nor grew as much as its untraced time" in c["message"] and "hvd.timeline.region" in c["message"]


def test_critical_path_runs_through_the_late_rank(runs):
    run = Run.load(runs["slow-data"], cache=False)
    cp = run.critical_path()
    assert set(cp["step"]) == set(range(12))
    for _step, p in cp.groupby("step"):
        kinds = p.sort_values("order")["kind"].tolist()
        assert kinds == ["phase", "phase", "phase", "negotiation", "collective", "synchronize"], kinds
        pre = p[p["kind"].isin(["phase", "negotiation"])]
        assert set(pre["rank"]) == {2}       # the late rank's phases and the negotiation it closed
        slowest = p[p["slowest"]]
        assert slowest["name"].tolist() == ["DATA_WAIT"]
        # the chain is in time order and ends with the step's last SYNCHRONIZE
        starts = p.sort_values("order")["start_ns"].tolist()
        assert starts[:5] == sorted(starts[:5])
        sync = p[p["kind"] == "synchronize"].iloc[0]
        coll = p[p["kind"] == "collective"].iloc[0]
        assert coll["end_ns"] <= sync["end_ns"]


def test_critical_path_without_phases(runs):
    cp = Run.load(runs["no-phases"], cache=False).critical_path()
    first = cp[cp["order"] == 0]
    assert (first["kind"] == "pre-submit").all() and (first["rank"] == 2).all()


def test_summarize_json_csv_and_breakdown(runs, tmp_path):
    p = subprocess.run([sys.executable, "-m", "viewer.cli", "summarize", str(runs["slow-data"]), "--json",
                        "--breakdown", "--csv", str(tmp_path / "csv"), "--top", "2"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    rc = data["root_cause"]
    assert [r["rank"] for r in rc] == [2] and rc[0]["cause"] == "data_wait_ns"
    assert data["findings"][0]["kind"] == "straggler" and "data wait" in data["findings"][0]["message"]
    by_rank = {r["rank"]: r for r in data["breakdown"]}
    assert by_rank[2]["data_wait_ns"] > 35 * MS and by_rank[2]["phases_known"] is True
    steps = [r for r in data["breakdown_steps"] if r["step"] >= 0]
    assert len(steps) == 4 * 12
    for r in steps:
        parts = [r[k] for k in ("data_wait_ns", "forward_ns", "backward_ns", "optimizer_ns", "exposed_comm_ns",
                                "other_ns")]
        assert sum(parts) == r["step_ns"]
    assert len({r["step"] for r in data["critical_path"]}) == 2   # --top 2: the two slowest steps
    with open(tmp_path / "csv" / "breakdown_steps.csv") as f:
        rows = [r for r in csv.DictReader(f) if int(r["step"]) >= 0]
    assert len(rows) == 48 and all(int(r["data_wait_ns"]) + int(r["forward_ns"]) + int(r["backward_ns"])
                                   + int(r["optimizer_ns"]) + int(r["exposed_comm_ns"]) + int(r["other_ns"])
                                   == int(r["step_ns"]) for r in rows)
    with open(tmp_path / "csv" / "root_cause.csv") as f:
        (row,) = list(csv.DictReader(f))
    assert row["cause"] == "data_wait_ns" and json.loads(row["counters"]) == []
    assert (tmp_path / "csv" / "critical_path.csv").exists()
    # without phases the JSON says so: NA buckets, phases_known false
    p = subprocess.run([sys.executable, "-m", "viewer.cli", "summarize", str(runs["no-phases"]), "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    data = json.loads(p.stdout)
    assert all(r["phases_known"] is False and r["data_wait_ns"] is None for r in data["breakdown"])
    assert data["root_cause"][0]["cause"] == "unknown"


def test_summarize_tables(runs):
    p = subprocess.run([sys.executable, "-m", "viewer.cli", "summarize", str(runs["no-phases"]), "--breakdown"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120, env={"COLUMNS": "200", "PATH": ""})
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "Where the step went" in out and "Why the late ranks are late" in out and "unknown" in out
    assert "Where each step went, per rank" in out and " ? " in out


def test_the_others_median_leaves_out_each_cell_once_ties_and_gaps_included():
    import numpy as np

    from viewer.analyses.rootcause import others_median

    nan = np.nan
    m = np.array([[1.0, 2.0, 2.0, 9.0],      # a tie: leaving out either 2 leaves 1, 2, 9
                  [4.0, nan, 6.0, 10.0],     # a gap: its own figure is the whole row's median
                  [5.0, nan, nan, nan]])     # nobody else: no median
    np.testing.assert_array_equal(others_median(m), [[2.0, 2.0, 2.0, 2.0],
                                                     [8.0, 6.0, 7.0, 5.0],
                                                     [nan, 5.0, 5.0, 5.0]])
