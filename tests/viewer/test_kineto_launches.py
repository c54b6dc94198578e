"""Kernel launch statistics (``viewer/kineto/launches.py``) on the real Kineto traces of
../shared/kineto_traces: the GPU's idle gaps add up to the temporal breakdown's idle time, every
launch call is found on both ranks of a pair whose clocks differ, and nccl_2rank's GPU waits on its
launches while single_rank's CPU runs far ahead of its GPU."""
from __future__ import annotations

import pytest

from tests.viewer.conftest import ROOT

SHARED = ROOT.parent / "shared" / "kineto_traces"
TRACES = ("nccl_2rank", "pair_128rank_job", "single_rank")


def _run(name):
    d = SHARED / name
    if not d.exists():
        pytest.skip(f"real Kineto traces not present at {SHARED} (../shared is absent)")
    from viewer.run import Run

    return Run.load(d)


@pytest.mark.parametrize("name", TRACES)
def test_idle_gaps_add_up_to_the_temporal_breakdown(name):
    run = _run(name)
    stats = run.kineto_launch_stats().set_index("rank")
    idle = run.kineto_temporal().set_index("rank")["idle_ns"]
    assert sorted(stats.index) == sorted(idle.index)
    for rank, s in stats.iterrows():
        assert s["idle_ns"] == idle[rank], (name, rank)
        assert s["step_start_idle_ns"] + s["in_step_idle_ns"] + s["outside_steps_idle_ns"] == s["idle_ns"]
        assert 0 <= s["host_wait_ns"] <= s["idle_ns"]
    kl = run.kineto_kernel_launches()
    assert (kl["host_wait_ns"] <= kl["gap_ns"]).all() and (kl["gap_ns"] >= 0).all()


def test_every_launch_call_is_found_on_a_rank_whose_clock_is_shifted():
    """pair_128rank_job's rank 1 starts 0.55 ms after rank 0 and its clock offset is 0.17 ms: its
    launch_ns must move onto the run's axis with its t_ns, or no launch call is found at it."""
    run = _run("pair_128rank_job")
    r1 = run.ranks.set_index("rank").loc[1]
    assert r1["base_epoch_ns"] - r1["clock_offset_ns"] != run.ranks.set_index("rank").loc[0, "base_epoch_ns"]
    stats = run.kineto_launch_stats().set_index("rank")
    assert (stats["launched"] == stats["work"]).all(), stats[["work", "launched"]]


def test_the_gpu_waits_on_launches_in_nccl_2rank_not_in_single_rank():
    busy = _run("nccl_2rank").kineto_launch_stats().iloc[0]
    ahead = _run("single_rank").kineto_launch_stats().iloc[0]
    # nccl_2rank: each piece of work starts µs after its launch call returns, and 44 % are launch-bound
    assert busy["delay_median_ns"] < 10_000 and busy["launch_bound_pct"] > 40
    assert busy["host_wait_ns"] > 0.9 * busy["idle_ns"]
    # single_rank: most work is shorter than its launch call, but the CPU runs ~76 ms ahead
    assert ahead["short_pct"] > 50 and ahead["launch_bound_pct"] < 5 and ahead["delay_median_ns"] > 10_000_000
