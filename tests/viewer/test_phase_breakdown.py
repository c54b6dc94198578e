"""The step breakdown by phase: every instant of a step in exactly one bucket, on runs written by the real
recorder (tests/viewer/phase_runs.py) and on every committed sample trace."""
from __future__ import annotations

import pytest

from tests.viewer.conftest import SAMPLES
from tests.viewer.phase_runs import MS, write_run
from tracer import vocab as V
from viewer import Run
from viewer.analyses import breakdown


def _sums_to_step(bd):
    """Rows with a STEP span: the six buckets add up to the step within 1 % (by construction: exactly)."""
    known = bd[bd["other_ns"].notna()]
    total = known[breakdown.BUCKETS].fillna(0).sum(axis=1)
    assert len(known) and (known["step_ns"] > 0).all()
    assert ((total - known["step_ns"]).abs() <= 0.01 * known["step_ns"]).all()
    return known


@pytest.mark.parametrize("scenario", sorted(p.name for p in SAMPLES.iterdir() if p.is_dir()))
def test_sums_to_step_on_every_sample(scenario):
    d = SAMPLES / scenario
    if not any(f.name.endswith((".json", ".json.gz")) for f in d.iterdir()):
        pytest.skip(f"sample_traces/{scenario} is empty")
    bd = Run.load(d, cache=False).breakdown_steps()
    known = _sums_to_step(bd)
    # the exact rule, not only within 1 %
    assert (known[breakdown.BUCKETS].fillna(0).sum(axis=1) == known["step_ns"]).all()
    # and the mean per rank adds up too (the last step of a run may have ops but no STEP span)
    _sums_to_step(breakdown.breakdown_by_rank(bd))


@pytest.mark.parametrize("kw", [{}, {"slow": {2: {"data_wait": 40}}}, {"gap_ms": {1: 7}}, {"phases": False},
                                {"slow": {1: {"forward": 6, "backward": 12}}, "noise": 0.3}])
def test_sums_to_step_on_synthetic_runs(tmp_path, kw):
    _sums_to_step(Run.load(write_run(tmp_path / "run", steps=6, **kw), cache=False).breakdown_steps())


def test_buckets_follow_the_precedence(tmp_path):
    run = Run.load(write_run(tmp_path / "run", steps=6, slow={2: {"data_wait": 40}}, noise=0.0), cache=False)
    bd = run.breakdown_steps()
    steps = bd[bd["step"] >= 0]
    assert steps["phases_known"].all() and len(steps) == 4 * 6
    r2 = steps[steps["rank"] == 2]
    # DATA_WAIT, FORWARD, BACKWARD as planted (the phase runs' BASE plus the slowdown)
    assert (r2["data_wait_ns"] - 42 * MS).abs().max() < 0.1 * MS
    assert (steps["forward_ns"] - 10 * MS).abs().max() < 0.1 * MS
    assert (steps["backward_ns"] - 20 * MS).abs().max() < 0.1 * MS
    # OPTIMIZER_STEP holds the SYNCHRONIZE: that part is exposed communication, the rest optimizer
    assert (steps["optimizer_ns"] - 3 * MS).abs().max() < 0.1 * MS
    others = steps[steps["rank"] != 2]
    assert (others["exposed_comm_ns"] > 40 * MS).all() and (r2["exposed_comm_ns"] < 3 * MS).all()
    assert (steps["other_ns"] == 0).all()
    by_rank = breakdown.breakdown_by_rank(bd)
    assert by_rank["phases_known"].all() and set(by_rank.columns) == set(breakdown.COLUMNS)


def test_untraced_time_is_other(tmp_path):
    bd = Run.load(write_run(tmp_path / "run", steps=4, gap_ms={3: 7}, noise=0.0), cache=False).breakdown_steps()
    steps = bd[bd["step"] >= 0]
    r3 = steps[steps["rank"] == 3]
    # step 0 starts at the rank's STEP start with the gap; later steps also open with it
    assert ((r3["other_ns"] - 7 * MS).abs() < 0.1 * MS).all()
    assert (steps[steps["rank"] != 3]["other_ns"] == 0).all()


def test_no_phases_means_unknown_not_guessed(tmp_path):
    bd = Run.load(write_run(tmp_path / "run", steps=4, phases=False), cache=False).breakdown_steps()
    steps = bd[bd["step"] >= 0]
    assert not steps["phases_known"].any()
    assert steps[breakdown.PHASE_BUCKETS].isna().all().all()
    assert (steps["exposed_comm_ns"] + steps["other_ns"] == steps["step_ns"]).all()


def test_phases_and_counters_carry_their_step(tmp_path):
    run = Run.load(write_run(tmp_path / "run", steps=3), cache=False)
    ev = run.events
    steps = ev[ev["name"] == V.STEP]
    phases = ev[ev["cat"] == V.CAT_PHASE]
    assert set(phases["name"]) == {V.DATA_WAIT, V.FORWARD, V.BACKWARD, V.OPTIMIZER_STEP}
    assert set(phases["step"]) == {0, 1, 2}
    counters = ev[ev["name"].isin(V.SYSTEM_COUNTERS)]
    assert set(counters["name"]) == {V.COUNTER_CPU_PCT, V.COUNTER_RSS_MB, V.COUNTER_LOAD1}
    assert (counters["ph"] == "C").all() and counters["value"].notna().all()
    # each counter sample lies in the STEP span of its step, on its rank
    span = steps.set_index(["rank", "step"])
    for r in counters.sample(40, random_state=0).itertuples():
        s = span.loc[(r.rank, r.step)]
        assert s["t_ns"] <= r.t_ns < s["t_ns"] + s["dur_ns"]


def test_phase_on_another_thread_and_region(tmp_path):
    """A phase on a user thread (TID_USER_BASE + k) and a region: named threads, steps by their start."""
    from tracer.config import TimelineSettings
    from tracer.timeline import TimelineRecorder

    rec = TimelineRecorder({"rank": 0, "size": 1}, TimelineSettings(spec=str(tmp_path) + "/"),
                           tmp_path / "rank-00000.json")
    t = rec.now()
    for step in range(2):
        rec.step = step
        t0 = t + step * 10 * MS
        rec.complete(V.TID_FRAMEWORK, V.STEP, V.CAT_FRAMEWORK, t0, t0 + 10 * MS)
        rec.complete(V.TID_USER_BASE + 1, V.DATA_WAIT, V.CAT_PHASE, t0 + 1 * MS, t0 + 4 * MS)
        rec.complete(V.TID_FRAMEWORK, "load_batch", V.CAT_REGION, t0 + 1 * MS, t0 + 2 * MS, {"step": 7})
    rec.close()
    run = Run.load(tmp_path, cache=False)
    ev = run.events
    dw = ev[ev["name"] == V.DATA_WAIT]
    assert set(dw["thread"]) == {"user:1"} and dw["step"].tolist() == [0, 1]
    region = ev[ev["cat"] == V.CAT_REGION]
    assert region["step"].tolist() == [0, 1]   # the STEP span holding it, not its args
    bd = run.breakdown_steps()
    assert (bd["data_wait_ns"] == 3 * MS).all() and (bd["other_ns"] == 7 * MS).all()


def test_one_step_number_twice_is_one_row(tmp_path):
    """mark_step(n) with the same n twice: both STEP spans are that step, once, summed."""
    from tracer.config import TimelineSettings
    from tracer.timeline import TimelineRecorder

    rec = TimelineRecorder({"rank": 0, "size": 1}, TimelineSettings(spec=str(tmp_path) + "/"),
                           tmp_path / "rank-00000.json")
    t = rec.now()
    rec.step = 3
    for k in range(2):
        t0 = t + k * 10 * MS
        rec.complete(V.TID_FRAMEWORK, V.STEP, V.CAT_FRAMEWORK, t0, t0 + 10 * MS)
        rec.complete(V.TID_FRAMEWORK, V.FORWARD, V.CAT_PHASE, t0, t0 + 6 * MS)
    rec.close()
    bd = Run.load(tmp_path, cache=False).breakdown_steps()
    assert bd[["step", "step_ns", "forward_ns", "other_ns"]].values.tolist() == [[3, 20 * MS, 12 * MS, 8 * MS]]


def test_a_checkpoint_phase_is_its_own_bucket_and_cause(tmp_path):
    """CHECKPOINT (hvd.timeline.checkpoint) is a phase like the others: its own bucket, still adding up
    to the step, the cause when one rank's checkpoints make it late, and a column of the summary."""
    import json
    import subprocess
    import sys

    d = write_run(tmp_path / "run", steps=8, checkpoint_ms={1: 15.0})
    run = Run.load(d, cache=False)
    _sums_to_step(run.breakdown_steps())
    by_rank = run.breakdown().set_index("rank")
    assert by_rank.loc[1, "checkpoint_ns"] == pytest.approx(15 * MS, rel=0.01)
    assert (by_rank.drop(index=1)["checkpoint_ns"] == 0).all()
    assert run.root_cause().set_index("rank").loc[1, "cause"] == "checkpoint_ns"
    (f,) = run.findings()[lambda d: d["kind"] == "straggler"].to_dict("records")
    assert "checkpoint is 15" in f["message"] and "async_save" in f["message"]
    p = subprocess.run([sys.executable, "-m", "viewer.cli", "summarize", str(d), "--full"], capture_output=True,
                       text=True, env={"COLUMNS": "200", "PATH": ""}, timeout=120)
    assert p.returncode == 0 and " checkpoint " in p.stdout, p.stderr
    data = json.loads(subprocess.run([sys.executable, "-m", "viewer.cli", "summarize", str(d), "--json"],
                                     capture_output=True, text=True, timeout=120).stdout)
    assert {r["rank"]: r["checkpoint_ns"] > 10 * MS for r in data["breakdown"]} == {0: False, 1: True, 2: False,
                                                                                    3: False}
