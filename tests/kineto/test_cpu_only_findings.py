"""The findings of a real CPU DDP job (torch gloo, 2 ranks, torch.profiler): a CPU-only profile has no
GPU kernels, so the GPU findings stay silent rather than fire on missing figures, no runtime advice
appears, and a rank that launches its collectives last is named as the late-rank rule says, with the
clock offsets' uncertainty weighed."""
from __future__ import annotations

RUNTIME_WORDS = ("RINGSCOPE_", "HOROVOD_", "hvd.timeline", "priority=")
WITHIN = "within twice the clock offsets' uncertainty"


def _late(run):
    from viewer.analyses import stragglers as st

    return st.late_ranks(run.kineto_rank_stragglers(), int(run.ranks["rank"].nunique()), run.step_ns)


def test_no_gpu_findings_and_no_runtime_advice_on_a_cpu_only_profile(ddp_run):
    from viewer.run import Run

    run = Run.load(ddp_run)
    assert "kineto" in run.has and not {"runtime", "ringscope"} & run.has
    # no GPU work: the GPU analyses are empty, not NaN rows
    assert not len(run.kineto_temporal()) and not len(run.kineto_overlap()) and not len(run.kineto_launch_stats())
    assert run.kineto_steps()["exposed_comm_ns"].isna().all()
    found = run.findings()
    assert set(found["kind"]) <= {"straggler"}, found[["kind", "message"]]
    for text in [*found["title"], *found["message"], run.headline()["verdict"]]:
        assert not [w for w in RUNTIME_WORDS if w in text], text
    # a straggler finding names exactly the ranks the late-rank rule flags (as for a runtime's negotiations)
    late = _late(run).set_index("rank")
    assert sorted(r for ev in found["evidence"] for r in ev["ranks"]) == sorted(late.index.astype(int))
    unc = float(run.ranks["clock_offset_uncertainty_ns"].max())
    for _, f in found.iterrows():
        within = float(late.loc[f["evidence"]["ranks"][0], "median_lateness_ns"]) <= 2 * unc
        assert (WITHIN in f["message"]) == within and (f["severity"] == "medium" or not within)


def test_a_rank_late_before_every_collective_is_named_with_the_clocks_doubt(late_ddp_run):
    """Rank 1 sleeps 20 ms before each collective. Its collectives alone cannot tell a rank always late
    from a clock running behind: the offset estimate takes up part of the lateness and its uncertainty
    spans the rest, so the finding says so and stays medium."""
    from viewer.run import Run

    run = Run.load(late_ddp_run)
    found = run.findings()
    assert found["kind"].tolist() == ["straggler"], found[["kind", "message"]]
    f = found.iloc[0]
    assert f["evidence"]["ranks"] == [1] and f["severity"] == "medium"
    assert f["message"].startswith("rank 1 launched its collectives last in 100 % of the 6 collectives seen on "
                                   "both loaded ranks (chance: 50 %)")
    assert WITHIN in f["message"] and "DataLoader num_workers" in f["message"]
    assert f["evidence"]["steps"] and set(f["evidence"]["steps"]) <= {2, 3, 4}
    t0, t1 = f["evidence"]["window_ns"]
    assert t1 - t0 > 20_000_000   # the step, with the sleeps in it
    assert f["evidence"]["value"] > 10_000_000   # the wait it imposed per step, ns


def test_the_clock_uncertainty_decides_what_a_late_launch_says(late_ddp_run):
    """straggler_rows on that late rank's own row, its lead weighed against a quarter of it (the order is
    then sure) and against unknown offsets."""
    from viewer.findings.kineto import straggler_rows
    from viewer.run import Run

    late = _late(Run.load(late_ddp_run))
    r = late.iloc[0]
    lead = float(r["median_lateness_ns"])
    [sure] = straggler_rows(late.iloc[:1], 2, lead / 4)
    [unknown] = straggler_rows(late.iloc[:1], 2, None)
    assert "uncertainty" not in sure["message"] and "unknown" not in sure["message"]
    assert sure["severity"] == ("high" if r["share_pct"] >= 10 else "medium")
    assert "clock offsets are unknown" in unknown["message"] and unknown["severity"] == "medium"
