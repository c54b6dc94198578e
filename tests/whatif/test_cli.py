"""``ringscope whatif`` and ``ringscope tune`` as a user runs them."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest

from tests.viewer.conftest import HOROVOD_DIR, ROOT, SAMPLES


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "viewer.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_whatif_json_has_the_three_step_times():
    p = _cli("whatif", SAMPLES / "straggler", "--no-straggler", "--json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    # rank 3 sleeps 60 ms of a 127 ms step; the healthy run recorded right after it stepped 96 ms
    assert res["predicted_step_ms"] < 0.8 * res["baseline_step_ms"]
    assert abs(res["baseline_step_ms"] / res["measured_step_ms"] - 1) <= 0.10
    assert res["settings"]["no_straggler"] and res["timeline"] and res["fits"]


def test_whatif_json_reads_the_runs_headline():
    """The measured step and α/β are summarize's headline figures, not the replay's own; the baseline
    and the prediction are the same statistic as the step (the median over the steps replayed), and
    the replay's response-cost fit is not named α/β."""
    p = _cli("summarize", SAMPLES / "healthy", "--json")
    assert p.returncode == 0, p.stderr
    head = json.loads(p.stdout)["headline"]
    p = _cli("whatif", SAMPLES / "healthy", "--fusion-threshold-mb", "0", "--json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert head["alpha_us"] is not None   # the healthy run's allreduce fit is credible
    assert (res["measured_step_ms"], res["alpha_us"], res["beta_gbps"]) == (
        head["step_ms"], head["alpha_us"], head["beta_gbps"])
    assert res["baseline_step_ms"] == statistics.median(r["baseline_ms"] for r in res["steps"])
    assert res["predicted_step_ms"] == statistics.median(r["predicted_ms"] for r in res["steps"])
    assert res["fits"] and all({"fixed_us", "us_per_mib"} <= set(f) and not any("alpha" in k or "gb" in k for k in f)
                               for f in res["fits"])


def test_whatif_text_names_measured_baseline_and_prediction():
    p = _cli("whatif", SAMPLES / "healthy", "--fusion-threshold-mb", "0", "--ranks", "8")
    assert p.returncode == 0, p.stderr
    for word in ("measured:", "baseline:", "predicted:", "an extrapolation", "median error", "x busy)"):
        assert word in p.stdout


def test_tune_gives_settings_and_how_to_apply_them():
    p = _cli("tune", SAMPLES / "tiny-tensors", "--json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    best = res["best"]
    assert best["predicted_step_ms"] <= res["current"]["predicted_step_ms"]
    assert len(res["grid"]) >= 9
    assert res["apply"]["ringscope_run"].startswith("ringscope run --fusion-threshold-mb ")
    assert f"RINGSCOPE_CYCLE_TIME={best['cycle_time_ms']:g}" in res["apply"]["env"]
    assert "HOROVOD_FUSION_THRESHOLD=" in res["apply"]["horovod_env"]
    conf = res["confidence"]
    # the run's settings are kept unless another beats them by more than the model's error
    assert conf["keep_pct"] >= max(1.0, conf["model_error_pct"]) > 0
    assert best == res["current"] or res["gain_pct"] > conf["keep_pct"]
    runner = conf["runner_up"]
    assert (runner["fusion_threshold"], runner["cycle_time_ms"]) != (best["fusion_threshold"], best["cycle_time_ms"])
    assert conf["same_as_best"] >= 1 and conf["within_error"] >= 1
    # only a kept run setting may trail the runner-up (by less than the model's error)
    assert conf["lead_pct"] > 0 or (best == res["current"] and -conf["lead_pct"] < conf["keep_pct"])
    assert conf["lead_pct"] == pytest.approx(100 * (runner["predicted_step_ms"] / best["predicted_step_ms"] - 1))
    assert conf["level"] == ("high" if conf["lead_pct"] > 2 * conf["model_error_pct"] else
                             "low" if conf["lead_pct"] < conf["model_error_pct"] else "medium")
    assert conf["within_error"] >= 1


def test_tune_on_a_horovod_timeline():
    f = HOROVOD_DIR / "horovod0281_mpi_2ranks.json"
    if not f.exists():
        pytest.skip(f"real Horovod timelines not present at {HOROVOD_DIR} (../shared is absent)")
    p = _cli("tune", f)
    assert p.returncode == 0, p.stderr
    assert "defaults assumed" in p.stdout and "HOROVOD_CYCLE_TIME=" in p.stdout
    assert "confidence: " in p.stdout and "the model's median error per step" in p.stdout


@pytest.mark.parametrize("args, words", [
    (["whatif", "/nonexistent/run"], ["/nonexistent/run"]),
    (["whatif", SAMPLES / "healthy", "--latency-scale", "0"], ["--latency-scale"]),
])
def test_bad_input_is_one_line(args, words):
    p = _cli(*args)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert all(w in p.stderr for w in words), p.stderr


def test_a_timeline_that_never_finished_says_so():
    f = HOROVOD_DIR / "legacy_nccl_fused_7ranks.json"
    if not f.exists():
        pytest.skip(f"real Horovod timelines not present at {HOROVOD_DIR} (../shared is absent)")
    p = _cli("whatif", f)
    assert p.returncode == 2 and "no complete step to replay" in p.stderr and "Traceback" not in p.stderr
