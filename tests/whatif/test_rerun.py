"""One real check at small scale: record the demo's straggler on 4 ranks, predict it with fusion off, rerun
it with fusion off for real, and compare (loosely: on this shared 2-core machine the collectives and the
compute fight over the cores, which the model only approximates; see docs/WHATIF.md). The direction of
each knob on a run without a straggler is test_samples' (recorded runs, no noise)."""
from __future__ import annotations

import warnings

import pytest

from bench.rerun import record
from viewer import Run
from viewer.whatif import Settings, fit, predict

pytestmark = pytest.mark.timeout(600)
STEPS = 8


def _load(d):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Run.load(d, cache=False)


def _recorded_and_unfused(tmp_path_factory, scenario: str, ranks: int) -> dict:
    """A real run of the scenario, and its rerun with fusion off."""
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp(f"whatif_{scenario}")
    return {"base": _load(record(scenario, ranks, STEPS, d / "base")),
            "off": _load(record(scenario, ranks, STEPS, d / "off", fusion_threshold_mb=0))}


# Fusion off under a straggler, predicted against a real 4-rank rerun. The target (the bench) is 20 %;
# this bound is looser because on 2 shared cores two runs of one setting already differ by 10-25 %
# (more under load), so the test checks the model's size, not the machine's noise. The model this
# replaced (compute stretched by every added collective, hidden or not) was +95 % off on a quiet host.
STRAGGLER_BOUND = 0.35


@pytest.fixture(scope="module")
def straggler_runs(tmp_path_factory):
    return _recorded_and_unfused(tmp_path_factory, "straggler", 4)


def test_straggler_fusion_off_predicted_against_a_real_rerun(straggler_runs):
    model = fit(straggler_runs["base"])
    pred = predict(model, Settings(fusion_threshold=0))
    real = straggler_runs["off"].headline()["step_ms"]
    assert pred["predicted_step_ms"] > pred["baseline_step_ms"]
    assert abs(pred["predicted_step_ms"] / real - 1) <= STRAGGLER_BOUND, (pred["predicted_step_ms"], real)


def test_the_rerun_ran_unfused(straggler_runs):
    fo = straggler_runs["off"].fused_ops
    assert (fo["count"] == 1).all() and (straggler_runs["base"].fused_ops["count"] > 1).any()


def test_straggler_hides_the_unfused_collectives(straggler_runs):
    """The late rank sets the step: the unfused collectives of the tensors it submits early run
    while it still computes, so the step grows by less than the collective time fusion off adds."""
    from viewer.whatif.replay import replay_step

    model = fit(straggler_runs["base"])
    grew, added = [], []
    for st in model.steps:
        on, off = replay_step(model, Settings(), st), replay_step(model, Settings(fusion_threshold=0), st)
        grew.append(off["predicted_ns"] - on["predicted_ns"])
        added.append(sum(e - a for a, e, _ in off["runs"]) - sum(e - a for a, e, _ in on["runs"]))
    assert sum(added) > 0 and sum(grew) < sum(added), (sum(grew), sum(added))
