"""Replaying each sample trace with its own settings reproduces its step time; each knob moves
the prediction the right way."""
from __future__ import annotations

from dataclasses import replace

import pytest

from tests.whatif.conftest import REPLAYABLE, sample_model
from viewer.whatif import Settings, predict
from viewer.whatif.replay import replay_step


@pytest.mark.parametrize("scenario", REPLAYABLE)
def test_baseline_reproduces_step_time(scenario):
    """The run's step time within 10 %; each step within 15 % (the dispatch latency is calibrated
    on the mean, so the per-step figure is what the calibration does not absorb; on this loaded
    machine one sample's steps differ from each other by up to 50 %)."""
    res = predict(sample_model(scenario), Settings())
    assert abs(res["baseline_step_ms"] / res["measured_step_ms"] - 1) <= 0.10, res["steps"]
    assert res["baseline_error_pct"] <= 15, res["steps"]
    assert len(res["steps"]) >= 3


def test_hang_has_no_complete_step_past_the_hang():
    """`hang`: the job is killed mid-step, so only the steps before the missing tensor replay;
    the step that hung is left out rather than predicted (meaningless: it never ended)."""
    model = sample_model("hang")
    assert [s.step for s in model.steps] == [0, 1, 2]   # rank 3 skips its tensor at step 3


def _mean(model, s):
    return sum(replay_step(model, s, st)["predicted_ns"] for st in model.steps) / len(model.steps)


@pytest.mark.parametrize("scenario", REPLAYABLE)
def test_knobs_move_the_right_way(scenario):
    m = sample_model(scenario)
    base = _mean(m, Settings())
    off = _mean(m, Settings(fusion_threshold=0))
    if scenario == "large-tensors":
        # a few tensors of several MB: one collective each either way, so fusion hardly matters
        # (a real 4-rank rerun of this scenario unfused: 129 ms against 133 fused)
        assert abs(off / base - 1) < 0.02
    elif scenario == "healthy":   # no straggler hides the unfused collectives
        assert off > 1.2 * base
    else:
        assert off > base                                            # fusion off: more collectives
    assert _mean(m, Settings(bandwidth_scale=4)) < base
    assert _mean(m, Settings(latency_scale=4)) > base
    assert _mean(m, Settings(ranks=2 * m.size)) > base                # ring: 2(p-1) latency steps


@pytest.mark.parametrize("scenario", ("healthy", "large-tensors"))
def test_a_long_cycle_delays_negotiation(scenario):
    """A cycle longer than the step holds tensors back while others are partly submitted (the
    coordinator) or until the next round (the response cache). Not `tiny-tensors`: its 64 KiB
    threshold fills, or nothing is partly submitted, before any cycle ends, so the runtime
    (and the replay) send at once whatever the cycle. Not `straggler`: the late rank's last
    submission flushes everything at once, so the hold costs nothing there, and one fused
    collective after the backward pass, instead of several during it, contends less with the
    compute (the replay predicts it within 1 % of the run's own settings)."""
    m = sample_model(scenario)
    assert _mean(m, Settings(cycle_time_ms=200.0)) > _mean(m, Settings())


def test_a_longer_cycle_fuses_more():
    """On the coordinator's path (`tiny-tensors` predates the response cache) a longer cycle gathers
    more per response: fewer collectives. (The step time can go either way: later dispatch, less
    engine work.)"""
    m = sample_model("tiny-tensors")
    runs = [sum(len(replay_step(m, Settings(cycle_time_ms=c), st)["runs"]) for st in m.steps)
            for c in (m.cycle_time_ms, m.cycle_time_ms * 10)]
    assert runs[0] > runs[1]


def test_no_straggler_removes_the_planted_delay():
    m = sample_model("straggler")
    base, fixed = _mean(m, Settings()), _mean(m, Settings(no_straggler=True))
    assert fixed < 0.8 * base   # the straggler sleeps 60 ms of a ~127 ms step (the healthy run: 96 ms)


def test_ranks_crowd_only_the_cores_they_share():
    """Without the straggler all four ranks compute at once: on two shared cores that slows each,
    on a core of its own (bound, as many cores as ranks) it does not."""
    m = sample_model("straggler")
    ranks = sorted(m.steps[0].chains)
    shared = replace(m, cores={r: ("host", 2) for r in ranks})
    alone = replace(m, cores={r: (r, 1) for r in ranks})
    fixed = Settings(no_straggler=True)
    assert _mean(alone, fixed) < _mean(shared, fixed)
    assert _mean(alone, Settings()) == pytest.approx(_mean(m, Settings()), rel=0.05)


def test_fusion_threshold_changes_the_plan():
    m = sample_model("tiny-tensors")   # recorded with a 64 KiB threshold
    st = m.steps[1]
    n = {thr: len(replay_step(m, Settings(fusion_threshold=thr), st)["runs"])
         for thr in (0, 16 << 10, 64 << 10, 1 << 20)}
    assert n[0] == len(st.tensors) > n[16 << 10] > n[64 << 10] >= n[1 << 20]


def test_prediction_has_a_drawable_timeline():
    res = predict(sample_model("healthy"), Settings(fusion_threshold=0))
    tl = res["timeline"]
    assert set(tl["source"]) == {"predicted", "measured"}
    assert {"framework", "comm"} <= set(tl["lane"])
    assert (tl["end_ms"] >= tl["start_ms"]).all()
    pred = tl[(tl["source"] == "predicted") & (tl["lane"] == "comm") & (tl["rank"] == 0)]
    assert len(pred) == 133   # fusion off: one collective per gradient and the loss


def test_extrapolation_is_flagged():
    assert predict(sample_model("healthy"), Settings(ranks=8))["extrapolated"]
    assert not predict(sample_model("healthy"), Settings())["extrapolated"]


def test_priorities_come_from_the_trace():
    """The replay plans with the priorities the trace recorded (tensor_ops.priority)."""
    import warnings

    from tests.viewer.conftest import SAMPLES
    from viewer import Run
    from viewer.whatif.rebuild import rebuild

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tables = Run.load(SAMPLES / "healthy", cache=False).tables
    name = str(tables.tensor_ops["tensor"].iloc[-1])
    tables.tensor_ops["priority"] = tables.tensor_ops["priority"].where(tables.tensor_ops["tensor"] != name, 7)
    got = {t.name: t.priority for st in rebuild(tables) for t in st.tensors}
    assert got[name] == 7 and set(got.values()) == {0, 7}
