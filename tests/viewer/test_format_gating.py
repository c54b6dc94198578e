"""Findings gated by what the run is (issue 41), on the real traces of ../shared: no finding on a
torch.profiler (Kineto) run or a Horovod timeline carries advice for a runtime the run did not use,
nccl_2rank (its GPU idle 77.8 % of the time, HTA) gets the GPU idle finding, and a rule that needs our
runtime (or any Horovod-style runtime) is never evaluated on a run without it."""
from __future__ import annotations

import pytest

from tests.viewer.conftest import HOROVOD_DIR, ROOT

KINETO_DIR = ROOT.parent / "shared" / "kineto_traces"
ABSENT = "(absent)"
KINETO = sorted(p.name for p in KINETO_DIR.glob("*/") if p.is_dir()) or [ABSENT]
HOROVOD = sorted(p.name for p in HOROVOD_DIR.glob("*.json")) or [ABSENT]
# runtime advice: our runtime's settings, its timeline API, its priorities; on Kineto, Horovod's too
NOT_ON_HOROVOD = ("RINGSCOPE_", "hvd.timeline", "priority=")
NOT_ON_KINETO = (*NOT_ON_HOROVOD, "HOROVOD_")
RUNTIME_KINDS = {"fusion_threshold", "fusion_starved", "memcpy", "priority", "alpha_beta"}


def _load(where, name):
    path = where / name
    if name == ABSENT or not path.exists():
        pytest.skip(f"real traces not present at {where} (../shared is absent)")
    from viewer.run import Run

    return Run.load(path)


def _words(run) -> list[str]:
    """Every sentence the run's findings show: titles, messages and the verdict built from them."""
    found = run.findings()
    return [*found["title"], *found["message"], run.headline()["verdict"]]


@pytest.mark.parametrize("name", KINETO)
def test_no_runtime_advice_on_kineto_traces(name):
    run = _load(KINETO_DIR, name)
    assert "kineto" in run.has and not {"runtime", "ringscope"} & run.has
    found = run.findings()
    assert not RUNTIME_KINDS & set(found["kind"]), found[["kind", "message"]]
    for text in _words(run):
        assert not [w for w in NOT_ON_KINETO if w in text], text


@pytest.mark.parametrize("name", HOROVOD)
def test_no_ringscope_advice_on_horovod_timelines(name):
    run = _load(HOROVOD_DIR, name)
    assert "runtime" in run.has and "ringscope" not in run.has
    for text in _words(run):
        assert not [w for w in NOT_ON_HOROVOD if w in text], text


def test_nccl_2rank_gets_the_gpu_idle_finding():
    run = _load(KINETO_DIR, "nccl_2rank")
    found = run.findings()
    idle = found[found["kind"] == "gpu_idle"]
    assert len(idle) == 1, found[["kind", "title"]]
    f = idle.iloc[0]
    assert f["severity"] in ("high", "medium") and found.iloc[0]["kind"] == "gpu_idle"   # the first finding
    ev = f["evidence"]
    assert ev["ranks"] == [0] and ev["metric"] == "idle_pct" and abs(ev["value"] - 77.78) < 0.5
    assert "78 %" in f["message"] and "waited for the host" in f["message"]
    steps = set(run.step_times()["step"])
    assert ev["steps"] and set(ev["steps"]) <= steps
    t0, t1 = ev["window_ns"]
    assert 0 <= t0 < t1 and t1 - t0 > 1_000_000   # the longest idle gap, more than a millisecond
    assert run.headline()["verdict"].startswith("The GPU sat idle 78 %")


def test_each_kineto_trace_gets_the_findings_its_figures_call_for():
    """nccl_2rank: idle GPU bound by its launches; pair_128rank_job: idle GPU and exposed NCCL time
    (overlap 12 %, 27 % of the step); single_rank, its GPU computing 97 % of the time: none."""
    kinds = {n: set(_load(KINETO_DIR, n).findings()["kind"]) for n in ("nccl_2rank", "pair_128rank_job", "single_rank")}
    assert kinds == {"nccl_2rank": {"gpu_idle", "launch_overhead"}, "pair_128rank_job": {"gpu_idle", "low_overlap"},
                     "single_rank": set()}


@pytest.mark.parametrize("where,name", [(KINETO_DIR, n) for n in KINETO] + [(HOROVOD_DIR, n) for n in HOROVOD])
def test_rules_run_only_on_the_runs_they_declare(where, name):
    """Every rule is watched while the real run's findings are made: the ones that ran are exactly those
    whose needs the run has, so none needing our runtime (or a runtime) ran on a run without it."""
    from viewer.findings.rule import RULES, Rule

    run = _load(where, name)
    ran, rules = [], list(RULES)

    def watched(r):
        def fn(run, peak=None):
            ran.append(r)
            return r.fn(run, peak)
        return Rule(fn, r.needs)
    RULES[:] = [watched(r) for r in rules]
    try:
        run.findings()
    finally:
        RULES[:] = rules
    assert {id(r) for r in ran} == {id(r) for r in rules if r.needs <= run.has}
    lacking = {"runtime", "ringscope"} - run.has
    assert lacking and not [r for r in ran if r.needs & lacking]
    assert ran   # the run's own rules did run (Kineto's, or a runtime's)
