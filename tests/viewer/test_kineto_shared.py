"""The three real Kineto traces of ../shared/kineto_traces load, and the figures whose definitions
are HTA's agree with HTA's own (HolisticTraceAnalysis 0.5.0) within 0.5 percentage points.

HTA's figures: pair_128rank_job and nccl_2rank from the folder's README; single_rank measured here
with HTA 0.5.0 in a separate virtualenv (``bench/kineto_hta_probe.py --figures`` prints them; HTA is no
dependency; ``test_kineto_hta_live.py`` runs it when ``$RINGSCOPE_HTA_PYTHON`` is set).
"""
from __future__ import annotations

import warnings

import pytest

from tests.viewer.conftest import ROOT

SHARED = ROOT.parent / "shared" / "kineto_traces"
TOLERANCE_PP = 0.5
# rank -> (overlap %, compute %, non-compute %, idle %)
HTA = {
    "pair_128rank_job": {0: (11.81, 17.71, 28.74, 53.56), 1: (20.05, 22.57, 22.72, 54.72)},
    "nccl_2rank": {0: (14.31, 17.26, 4.97, 77.78)},
    "single_rank": {0: (None, 96.75, 0.62, 2.63)},
}


def _run(name):
    d = SHARED / name
    if not d.exists():
        pytest.skip(f"real Kineto traces not present at {SHARED} (../shared is absent)")
    from viewer.run import Run

    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a clean file loads without any warning
        return Run.load(d)


@pytest.mark.parametrize("name", sorted(HTA))
def test_agrees_with_hta(name):
    run = _run(name)
    tb = run.kineto_temporal().set_index("rank")
    ov = run.kineto_overlap().set_index("rank")
    assert sorted(tb.index) == sorted(HTA[name])
    for rank, (overlap_pct, compute, non_compute, idle) in HTA[name].items():
        got = tb.loc[rank]
        assert abs(got["compute_pct"] - compute) <= TOLERANCE_PP, (name, rank, got)
        assert abs(got["non_compute_pct"] - non_compute) <= TOLERANCE_PP, (name, rank, got)
        assert abs(got["idle_pct"] - idle) <= TOLERANCE_PP, (name, rank, got)
        assert abs(got["compute_pct"] + got["non_compute_pct"] + got["idle_pct"] - 100) < 1e-6
        if overlap_pct is None:
            assert ov.loc[rank, "communication_ns"] == 0
        else:
            assert abs(ov.loc[rank, "overlap_pct"] - overlap_pct) <= TOLERANCE_PP, (name, rank, ov.loc[rank])


def test_exact_times_differ_from_hta_rounding_only_by_short_kernels():
    """Without HTA's µs rounding, idle shrinks (kernels keep their sub-µs parts), never grows."""
    from viewer.kineto import gpu_time
    from viewer.kineto.kernels import gpu_work

    run = _run("nccl_2rank")
    hta = run.kineto_temporal().iloc[0]
    exact = gpu_time.temporal_breakdown(gpu_work(run.tables, hta_rounding=False)).iloc[0]
    assert exact["idle_pct"] < hta["idle_pct"] and exact["compute_pct"] > hta["compute_pct"]
    assert abs(exact["idle_pct"] - hta["idle_pct"]) < 1.0


def test_the_analyses_answer_rank_by_rank_as_the_whole_run_does(monkeypatch):
    """The per-rank analyses, run one rank at a time, give what the run's whole tables give (two ranks)."""
    import pandas as pd

    from viewer import summary
    from viewer.kineto import gpu_time, launches, per_rank
    from viewer.kineto.kernels import gpu_work

    monkeypatch.setattr(per_rank, "BATCH_EVENTS", 1)   # each rank alone
    run = _run("pair_128rank_job")
    summary.build_summary(run, steps=True)
    work, last = gpu_work(run.tables), gpu_work(run.tables, include_last_step=True)
    kl = launches.kernel_launches(run.tables, work)
    whole = {"kineto_temporal": gpu_time.temporal_breakdown(work), "kineto_overlap": gpu_time.comm_comp_overlap(work),
             "kineto_streams": gpu_time.stream_table(work), "kineto_steps": gpu_time.step_breakdown(run.tables, last),
             "kineto_kernel_launches": kl, "kineto_launch_stats": launches.launch_stats(kl)}
    for name, expected in whole.items():
        got = run.get(name)
        assert got["rank"].nunique() == 2, name
        pd.testing.assert_frame_equal(got, expected, obj=name)


def test_nccl_2rank_collectives_steps_and_streams():
    from viewer.kineto import collectives

    run = _run("nccl_2rank")
    assert run.ranks["rank"].tolist() == [0] and run.size == 2 and run.ranks["closed"].all()
    assert run.ranks["base_epoch_ns"].iloc[0] == 1711964646000000000 + 4458676388068 * 1000   # base + first µs
    t = collectives.collectives_table(run.tables)
    assert len(t) == 21 and t["op"].value_counts().to_dict() == {"ALLREDUCE": 15, "BROADCAST": 6}
    first = t[t["op"] == "ALLREDUCE"].iloc[0]
    assert first["bytes"] == 2049000 * 4 and first["n"] == 2 and first["factor"] == 1.0   # 2(n-1)/n, n = 2
    assert first["algbw_gbps"] == pytest.approx(first["bytes"] / (first["time_us"] * 1e3), rel=1e-9)
    per_step = run.kineto_steps()
    assert per_step["step"].tolist() == [4, 5, 6] and (per_step["collectives"] == 7).all()
    assert (per_step["exposed_comm_ns"] <= per_step["communication_ns"]).all() and (per_step["gpu_idle_ns"] >= 0).all()
    st = run.kineto_streams().set_index("stream")
    assert set(st.index) == {"gpu:7", "gpu:40"}
    assert st.loc["gpu:40", "communication_ns"] > 0 and st.loc["gpu:40", "compute_ns"] == 0


def test_pair_128rank_two_of_many_ranks():
    """Two ranks of a 128-rank job: ranks from distributedInfo, ops named from the NCCL annotations
    (its old NCCL runs every collective as SendRecv kernels), one stream per communicator."""
    run = _run("pair_128rank_job")
    assert run.ranks["rank"].tolist() == [0, 1] and run.size == 128
    ops = run.fused_ops
    assert set(ops["op"]) == {"ALLTOALL", "ALLREDUCE", "ALLGATHER"}
    assert set(ops["activity"]) == {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"}
    assert set(run.tensor_ops["tensor"].str.split("#").str[0]) >= {"allgather/pgs203", "alltoall/pgs84"}
    assert (ops["bytes"] == 0).all()   # this torch recorded no sizes
    launches = run.kineto_launches()
    assert len(launches) and set(launches["n_ranks"]) == {2}
    assert run.ranks["clock_offset_uncertainty_ns"].notna().all()


def test_single_rank_has_steps_and_no_collective_kernels():
    run = _run("single_rank")
    steps = sorted(run.events.loc[run.events["name"].str.startswith("ProfilerStep#"), "step"])
    assert steps == [101, 102, 103, 104, 105]
    assert (run.fused_ops["backend"] == "nccl").all() and run.fused_ops["op"].isin(["ALLREDUCE", "BROADCAST"]).all()
    gpu = run.events[run.events["thread"] == "gpu:7"]
    assert len(gpu) == 4350 + 1600 + 145 and (gpu["launch_ns"].notna().mean() > 0.99)
