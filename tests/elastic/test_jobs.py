"""Real elastic jobs: MPI ranks under ``ringscope run --elastic``, a SIGKILLed rank, a slot added
by the discovery script, and a job that falls below --min-np."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from collectives.launcher import run_job
from tests.elastic.replay import replay
from tests.mpi_util import ROOT, mpi_env

HERE = Path(__file__).resolve().parent
ENV = {"OMP_NUM_THREADS": "1", "RINGSCOPE_ELASTIC_DISCOVERY_INTERVAL": "0.2"}
EPOCH_FIELDS = ("last_commit_epoch_ns", "failed_epoch_ns", "detected_epoch_ns",
                "relaunched_epoch_ns", "reformed_epoch_ns", "restored_epoch_ns",
                "first_step_end_epoch_ns")


def elastic(args: list[str], timeout: float = 240) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "collectives.launcher", "--elastic", *map(str, args)]
    rc, out = run_job(cmd, mpi_env(ENV), timeout, cwd=ROOT)
    assert rc is not None, f"elastic job timed out after {timeout}s\n{out[-4000:]}"
    return rc, out


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def events(path: Path, name: str) -> list[dict]:
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == name]


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """4 torch ranks; rank 2 SIGKILLs itself after step 10 (commits every 4 steps)."""
    d = tmp_path_factory.mktemp("killed")
    rc, out = elastic(["-np", 4, "--min-np", 2, "--timeline", f"{d}/tl/", HERE / "train_elastic.py",
                       "--log", d / "log.jsonl", "--kill-rank", 2, "--kill-at-step", 10])
    assert rc == 0, out[-4000:]
    return d, out, json.loads((d / "tl" / "elastic.json").read_text())


def test_killed_rank_job_finishes_with_three_from_the_last_commit(killed):
    d, out, journal = killed
    assert [(g["size"], g["end"]) for g in journal["generations"]] == [(4, "failure"), (3, "done")]
    (reset,) = journal["resets"]
    assert reset["kind"] == "lost" and (reset["size_before"], reset["size_after"]) == (4, 3)
    assert [r["rank"] for r in reset["lost"]] == [2]
    assert reset["hosts_before"] == ["localhost:4"] and reset["hosts_after"] == ["localhost:3"]
    assert reset["cause"].startswith("rank 2 (host localhost, pid ")
    assert reset["cause"].endswith("exited: killed by signal 9 (SIGKILL)")
    assert "rank 2 (host localhost" in out and "generation 1: 3 ranks from the last commit" in out
    log = lines(d / "log.jsonl")
    commits0 = [x["commit"] for x in log if x["gen"] == 0 and "commit" in x]
    steps1 = [x["step"] for x in log if x["gen"] == 1 and "step" in x]
    assert commits0 == [4, 8]
    assert steps1[0] == 9, "generation 1 starts right after the last commit"
    assert steps1 == list(range(9, steps1[-1] + 1))
    assert {round(x["lr"], 9) for x in log if "lr" in x} == {0.04, 0.03}   # 0.01 * hvd.size()
    assert {round(x["lr"], 9) for x in log if x["gen"] == 1 and "lr" in x} == {0.03}
    final = log[-1]
    assert final["final"] and final["epoch"] == 2 and final["size"] == 3


def test_loss_curve_continues_and_model_equals_the_replay_of_committed_steps(killed):
    d, _, _ = killed
    log = lines(d / "log.jsonl")
    loss = {(x["gen"], x["step"]): x["loss"] for x in log if "loss" in x}
    assert loss[(1, 9)] < 0.5 * loss[(0, 1)], "the new world does not start from scratch"
    final = log[-1]
    ref = replay([(4, 10), (3, None)])
    assert final["steps_done"] == ref["steps_done"]
    assert final["weight"] == pytest.approx(ref["weight"], abs=1e-5)
    assert final["bias"] == pytest.approx(ref["bias"], abs=1e-5)
    # the check can fail: restarting from another commit, or never shrinking, ends elsewhere
    for worlds in ([(4, 13), (3, None)], [(4, None)]):
        assert final["weight"] != pytest.approx(replay(worlds)["weight"], abs=1e-5), worlds


def test_trace_shows_the_reset_with_its_cost(killed):
    d, _, journal = killed
    (reset,) = journal["resets"]
    times = [reset[k] for k in EPOCH_FIELDS]
    assert all(isinstance(t, int) for t in times), reset
    assert times == sorted(times), "commit <= failed <= detected <= ... <= first step end"
    assert reset["last_commit_step"] == 6 and journal["generations"][1]["step_base"] == 7
    tl = d / "tl"
    assert sorted(p.name for p in (tl / "gen-000").iterdir()) == [f"rank-{r:05d}.json" for r in range(4)]
    gen1 = sorted((tl / "gen-001").iterdir())
    assert [p.name for p in gen1] == [f"rank-{r:05d}.json" for r in range(3)]
    for p in gen1:
        meta = json.loads(p.read_text())["otherData"]["ringscope"]
        assert meta["generation"] == 1 and meta["size"] == 3
        (ev,) = events(p, "ELASTIC_RESET")
        a = ev["args"]
        assert (ev["cat"], ev["tid"], a["kind"], a["generation"]) == ("elastic", 1, "lost", 1)
        assert a["cause"] == reset["cause"] and a["lost"] == reset["lost"]
        for k in ("detect_ms", "reform_ms", "restore_ms", "first_step_ms", "lost_ms", "redone_ms"):
            assert a[k] > 0, k
        assert a["lost_ms"] >= a["detect_ms"] + a["reform_ms"] + a["restore_ms"] - 1
        (restore,) = events(p, "ELASTIC_RESTORE")
        assert restore["args"]["bytes"] > 1000
        assert ev["ts"] <= restore["ts"] and restore["ts"] + restore["dur"] <= ev["ts"] + ev["dur"]
        steps = sorted(e["args"]["step"] for e in events(p, "STEP"))
        assert steps[0] == 7 and steps == list(range(7, steps[-1] + 1))
    commits0 = events(tl / "gen-000" / "rank-00000.json", "ELASTIC_COMMIT")
    assert [e["args"]["step"] for e in commits0] == [3, 7] and commits0[0]["args"]["bytes"] > 1000
    # the work after the last commit is in both worlds: lost in generation 0, redone in 1
    old_steps = {e["args"]["step"] for e in events(tl / "gen-000" / "rank-00000.json", "STEP")}
    assert {7, 8} <= old_steps


def test_slot_added_by_discovery_joins_at_the_next_commit(tmp_path):
    marker = tmp_path / "grow"
    script = tmp_path / "discover.sh"
    script.write_text(f"#!/bin/sh\nif [ -f {marker} ]; then echo localhost:3; "
                      f"else echo localhost:2; fi\n")
    script.chmod(0o755)
    rc, out = elastic(["-np", 2, "--max-np", 3, "--host-discovery-script", script,
                       "--timeline", f"{tmp_path}/tl/", HERE / "train_numpy.py",
                       "--log", tmp_path / "log.jsonl", "--steps", 30, "--touch", marker,
                       "--touch-at-step", 4, "--step-sleep", 0.05])
    assert rc == 0, out[-4000:]
    journal = json.loads((tmp_path / "tl" / "elastic.json").read_text())
    assert [(g["size"], g["end"]) for g in journal["generations"]] == [(2, "hosts_updated"), (3, "done")]
    (reset,) = journal["resets"]
    assert reset["kind"] == "added" and reset["added"] == [{"host": "localhost", "slots": 1}]
    assert reset["lost"] == [] and (reset["size_before"], reset["size_after"]) == (2, 3)
    assert reset["failed_epoch_ns"] == reset["last_commit_epoch_ns"], "the interrupt's commit"
    log = lines(tmp_path / "log.jsonl")
    last0 = max(x["step"] for x in log if x["gen"] == 0)
    first1 = min(x["step"] for x in log if x["gen"] == 1)
    assert last0 % 2 == 0 and first1 == last0 + 1, "interrupted at a commit, nothing redone"
    # w grows by 0.1 * mean(rank + 1): 0.15 a step on 2 ranks, 0.2 on 3
    assert log[-1]["step"] == 30
    assert log[-1]["w"] == pytest.approx(0.15 * last0 + 0.2 * (30 - last0))
    assert log[-1]["resets"] == [3], "the reset callbacks ran once, with the new size"
    # the process set the callback made again spans the new world's even ranks
    assert {(x["gen"], tuple(x["evens"]), x["n_evens"]) for x in log} == {(0, (0,), 1), (1, (0, 2), 2)}
    for p in (tmp_path / "tl" / "gen-001").iterdir():
        (ev,) = events(p, "ELASTIC_RESET")
        assert ev["args"]["kind"] == "added" and ev["args"]["added"] == reset["added"]


def test_job_below_min_np_stops_with_one_line(tmp_path):
    rc, out = elastic(["-np", 2, "--min-np", 2, "--timeline", f"{tmp_path}/tl/",
                       HERE / "train_numpy.py", "--log", tmp_path / "log.jsonl", "--steps", 40,
                       "--kill-rank", 1, "--kill-at-step", 3, "--step-sleep", 0.05], timeout=120)
    assert rc == 1
    ours = [x for x in out.splitlines() if x.startswith("ringscope")]
    assert len(ours) == 1 and "Traceback" not in out, out
    assert ours[0].startswith("ringscope run --elastic: rank 1 (host localhost, pid ")
    assert ours[0].endswith("killed by signal 9 (SIGKILL); 1 slot(s) left, below --min-np 2; stopping")
    journal = json.loads((tmp_path / "tl" / "elastic.json").read_text())
    assert [g["end"] for g in journal["generations"]] == ["below_min_np"]


def test_an_error_of_the_job_is_not_a_reset(tmp_path):
    rc, out = elastic(["-np", 2, "--min-np", 1, "--timeline", f"{tmp_path}/tl/",
                       HERE / "train_numpy.py", "--log", tmp_path / "log.jsonl", "--steps", 20,
                       "--raise-at-step", 3], timeout=120)
    assert rc == 1
    ours = [x for x in out.splitlines() if x.startswith("ringscope run")]
    assert ours == ["ringscope run --elastic: generation 0: rank 1 failed: ValueError: bad batch at step 3"]
    journal = json.loads((tmp_path / "tl" / "elastic.json").read_text())
    assert [g["end"] for g in journal["generations"]] == ["failure"] and journal["resets"] == []


def test_a_script_without_elastic_run_ends_as_done(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import numpy as np\nimport collectives as hvd\nhvd.init()\n"
                      "hvd.allreduce(np.ones(2), name='g')\nprint('finished', hvd.rank())\n")
    rc, out = elastic(["-np", 2, "--timeline", f"{tmp_path}/tl/", script], timeout=120)
    assert rc == 0 and out.count("finished") == 2, out
    journal = json.loads((tmp_path / "tl" / "elastic.json").read_text())
    assert [g["end"] for g in journal["generations"]] == ["done"]
