"""One real check at small scale: record the demo on 2 ranks, predict it with fusion off, rerun it
with fusion off for real, and compare (loosely: on this shared 2-core machine the collectives and
the compute fight over the cores, which the model only approximates; see docs/WHATIF.md)."""
from __future__ import annotations

import warnings

import pytest

from viewer import Run
from viewer.whatif import Settings, fit, predict
from viewer.whatif.rerun import record

pytestmark = pytest.mark.timeout(600)
STEPS = 8
LOOSE = 0.5   # relative error allowed against the real rerun


def _load(d):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Run.load(d, cache=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("whatif_rerun")
    return {"base": _load(record("healthy", 2, STEPS, d / "base")),
            "off": _load(record("healthy", 2, STEPS, d / "off", fusion_threshold_mb=0))}


def test_fusion_off_predicted_against_a_real_rerun(runs):
    pred = predict(fit(runs["base"].tables), Settings(fusion_threshold=0))
    real = predict(fit(runs["off"].tables), Settings())["measured_step_ms"]
    assert len(pred["steps"]) >= STEPS - 2
    assert abs(pred["baseline_step_ms"] / pred["measured_step_ms"] - 1) <= 0.10
    # the model's direction is right, and its size within the loose bound of the real rerun (whether the
    # rerun itself came out slower than the recorded run is the machine's noise at 2 ranks, not the model's)
    assert pred["predicted_step_ms"] > pred["baseline_step_ms"]
    assert abs(pred["predicted_step_ms"] / real - 1) <= LOOSE, (pred["predicted_step_ms"], real)


def test_the_rerun_ran_unfused(runs):
    fo = runs["off"].fused_ops
    assert (fo["count"] == 1).all() and (runs["base"].fused_ops["count"] > 1).any()
