"""Ranks sharing CPUs (more ranks than CPUs): what core sharing explains is said once, at info, and blamed on no
rank; what it cannot explain is still found. Runs written by the real recorder (tests/viewer/phase_runs.py)."""
from __future__ import annotations

import pandas as pd
import pytest

from tests.viewer.phase_runs import write_run
from viewer import Run
from viewer.analyses import cores

PAIRS = {0: [0], 1: [0], 2: [1], 3: [1]}   # ranks bound two to a core, as the DDP demo binds them
ALL = {r: [0, 1] for r in range(4)}         # four unbound ranks on a 2-core machine


def _ranks(cpu_sets, hosts=None):
    return pd.DataFrame({"rank": range(len(cpu_sets)), "host": hosts or ["vm"] * len(cpu_sets),
                         "cpu_set": pd.array(cpu_sets, dtype="string")})


def test_groups_of_ranks_with_more_ranks_than_cpus():
    pairs = cores.sharing(_ranks(["0", "0", "1", "1"]))
    assert pairs["group"].tolist() == [[0, 1], [0, 1], [2, 3], [2, 3]] and pairs["crowd"].tolist() == [2.0] * 4
    assert pairs["stretch"].tolist() == [2.0] * 4
    # 64 ranks on 2 CPUs: 32 ranks a CPU, but the others' median cannot all have had a CPU alone
    assert cores.sharing(_ranks(["0,1"] * 64))["stretch"].iloc[0] == pytest.approx(128 / 63)
    assert cores.describe(pairs) == "ranks 0 and 1 share CPU 0; ranks 2 and 3 share CPU 1"
    assert cores.describe(pairs, 3) == "ranks 2 and 3 share CPU 1"
    assert cores.describe(cores.sharing(_ranks(["0,1"] * 4))) == "ranks 0-3 share CPUs 0 and 1"
    # overlapping sets chain into one group: 3 ranks on CPUs 0-2 fit, a fourth on CPU 0 does not
    assert cores.sharing(_ranks(["0,1", "1,2", "2"])).empty
    assert cores.sharing(_ranks(["0,1", "1,2", "2", "0"]))["cpus"].iloc[0] == [0, 1, 2]
    assert cores.sharing(_ranks(["0,1", "0,1"])).empty                 # two ranks, two CPUs: no sharing
    assert cores.sharing(_ranks(["0", "0", "1", None])).empty           # one set unknown: as before cpu_set
    # CPU 0 of two hosts is two CPUs
    two = cores.sharing(_ranks(["0", "0", "0", "1"], hosts=["h0", "h0", "h1", "h1"]))
    assert cores.describe(two) == "ranks 0 and 1 share CPU 0 on host h0"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("core_sharing")
    # rank 2's loader is slow (planted); ranks 0 and 1 share a core, so their compute runs ~1.8x as long
    shared = {0: {"forward": 8, "backward": 16}, 1: {"forward": 8, "backward": 16}, 2: {"data_wait": 40}}
    # rank 3's compute runs 1.6x as long, as a rank the scheduler gives less of the 2 cores than the others
    slower = {3: {"forward": 6, "backward": 12}}
    return {
        "slow-data": write_run(d / "slow-data", slow=shared, noise=0.1, seed=11, cpu_sets=PAIRS),
        "slow-data-unknown": write_run(d / "slow-data-unknown", slow=shared, noise=0.1, seed=11),
        "slower": write_run(d / "slower", slow=slower, noise=0.1, seed=12, cpu_sets=ALL),
        "slower-unknown": write_run(d / "slower-unknown", slow=slower, noise=0.1, seed=12),
        "straggler": write_run(d / "straggler", gap_ms={3: 30}, noise=0.1, seed=13, cpu_sets=ALL),
        "contended": write_run(d / "contended", slow={1: {"forward": 25, "backward": 50}}, noise=0.1, seed=14,
                               cpu_sets=ALL),
    }


def _found(run):
    f = run.findings()
    return {k: f[f["kind"] == k] for k in f["kind"].unique()}


def test_phases_that_core_sharing_explains_are_no_imbalance(runs):
    run = Run.load(runs["slow-data"], cache=False)
    assert run.late_ranks()["rank"].tolist() == [2]
    rc = run.root_cause().set_index("rank")
    assert rc.loc[2, "cause"] == "data_wait_ns" and rc.loc[2, "late"]
    assert rc.loc[[0, 1], "cause"].tolist() == ["core_sharing"] * 2 and not rc.loc[[0, 1], "late"].any()
    found = _found(run)
    assert "phase_imbalance" not in found
    assert found["straggler"]["severity"].tolist() == ["high"]
    assert found["straggler"]["evidence"].iloc[0]["ranks"] == [2]
    sharing = found["core_sharing"].iloc[0]
    assert sharing["severity"] == "info"
    assert sharing["title"] == ("ranks 0 and 1 share CPU 0; ranks 2 and 3 share CPU 1, which explains the longer "
                                "phases of ranks 0 and 1")
    assert "rank 0's backward, forward" in sharing["message"] and "up to 2x as long" in sharing["message"]
    assert run.headline()["verdict"].startswith("Rank 2 is the straggler")
    # the same run without CPU sets: the ranks' phases are blamed on them, as before
    unknown = _found(Run.load(runs["slow-data-unknown"], cache=False))
    assert sorted(unknown["phase_imbalance"]["severity"]) == ["high", "high"] and "core_sharing" not in unknown


def test_a_late_rank_that_core_sharing_explains_is_no_straggler(runs):
    run = Run.load(runs["slower"], cache=False)
    assert run.late_ranks().empty and run.late_candidates()["rank"].tolist() == [3]
    assert run.headline()["late_rank"] is None and "no rank late" in run.headline()["verdict"]
    found = _found(run)
    assert not {"straggler", "phase_imbalance"} & set(found)
    title = found["core_sharing"]["title"].iloc[0]
    assert title == "ranks 0-3 share CPUs 0 and 1, which explains the lateness of rank 3"
    assert "rank 3 last in 100 % of negotiations, its backward, forward" in found["core_sharing"]["message"].iloc[0]
    unknown = Run.load(runs["slower-unknown"], cache=False)
    assert unknown.late_ranks()["rank"].tolist() == [3]
    assert _found(unknown)["straggler"]["severity"].tolist() == ["high"]


@pytest.mark.parametrize("name, rank, cause", [("straggler", 3, "unexplained"), ("contended", 1, "backward_ns")])
def test_what_core_sharing_cannot_explain_is_still_found(runs, name, rank, cause):
    """Time no phase covers (a sleep), or compute 3.5x the others': more than 2 ranks per CPU explain."""
    run = Run.load(runs[name], cache=False)
    assert run.late_ranks()["rank"].tolist() == [rank]
    assert run.root_cause().set_index("rank").loc[rank, "cause"] == cause
    found = _found(run)
    assert found["straggler"]["severity"].tolist() == ["high"]
    assert found["core_sharing"]["title"].tolist() == ["ranks 0-3 share CPUs 0 and 1"]
    assert run.headline()["verdict"].startswith(f"Rank {rank} is the straggler")
