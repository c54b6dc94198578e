"""The pages' figures are plain functions from a run's analyses to plotly figures: checked without a browser,
on real runs held by the dashboard's store."""
import json

import numpy as np
import pandas as pd
import plotly
import pytest

from tests.dashboard.conftest import SAMPLES, SHARED, horovod_file
from viewer import units
from viewer.dashboard import figures, pages
from viewer.dashboard.fig_timeline import timeline_figure
from viewer.dashboard.registry import Registry


@pytest.fixture(scope="module")
def straggler():
    """The real 4-rank sample run with rank 3 slowed."""
    return Registry().add_path(SAMPLES / "straggler")


@pytest.fixture(scope="module")
def legacy():
    return Registry().add_path(horovod_file("legacy_nccl_fused_7ranks.json"))


def test_heatmap_has_a_row_per_rank_and_marks_the_straggler(straggler):
    matrix = straggler.run.lateness()
    hm = figures.rank_step_heatmap(matrix).data[0]
    assert list(hm.y) == [0, 1, 2, 3]
    assert hm.z.shape == (4, matrix.shape[1])
    assert np.nanmean(hm.z, axis=1).argmax() == 3   # the planted slow rank is the latest row
    assert hm.z.max() == pytest.approx(matrix.to_numpy().max() / 1e6)   # drawn in ms


def test_heatmap_bins_many_steps():
    m = pd.DataFrame(np.ones((2, 1500)), index=[0, 1], columns=range(1500))
    hm = figures.rank_step_heatmap(m).data[0]
    assert len(hm.x) <= figures.MAX_STEP_COLUMNS


def test_real_horovod_timeline_names_rank_7_as_straggler(legacy):
    fig = figures.times_last_bar(legacy.run.stragglers())
    times = dict(zip(fig.data[0].x, fig.data[0].customdata[:, 0]))
    assert max(times, key=lambda k: int(times[k])) == "rank 7"
    assert dict(zip(fig.data[0].x, fig.data[0].y))["rank 7"] > 90
    assert legacy.run.headline()["late_rank"] == 7


def test_fusion_histograms_are_the_allreduces_the_summary_counts(straggler):
    ops, fus = pages.allreduces(straggler.run), straggler.run.fusion()
    thr = fus["threshold"].iloc[0]
    assert thr == straggler.run.meta["fusion_threshold"] == 128 << 20
    assert len(ops) == fus["ops"].iloc[0] and (ops["op"] == "ALLREDUCE").all()   # run.fusion()'s ops, no broadcast
    fill = figures.fill_histogram(ops, thr)
    assert any(s.x0 == 1.0 for s in fill.layout.shapes)  # the threshold line
    assert sum(fill.data[0].y) == len(ops)
    counts = figures.count_histogram(ops, thr)
    assert list(counts.data[0].x) == sorted(ops["count"].unique()) and "128 MiB" in counts.layout.title.text
    assert sum(figures.memcpy_share_histogram(ops).data[0].y) == len(ops)


def test_busbw_figure_draws_only_credible_fits_and_the_peak(straggler):
    run = straggler.run
    ab = run.alpha_beta()
    assert not ab.set_index("op").loc["ALLREDUCE", "credible"]   # r² 0.35 on this run
    fig = figures.busbw_figure(run.op_bandwidth(), ab[ab["credible"]], 3.0, peak_given=True)
    fits = [t.name for t in fig.data if " fit: " in t.name]
    assert fits == ["ring BROADCAST fit: α 38.5 µs, β 5.15 GB/s"]
    assert any(s.y0 == 3.0 for s in fig.layout.shapes)
    assert len(fig.data[0].x) <= figures.MAX_OPS_SHOWN


def test_timeline_figure_lanes_phases_and_axis_from_the_first_event(straggler):
    win = straggler.timeline.window(ranks=[1])
    fig = timeline_figure(win)
    assert {t.name for t in fig.data} >= {"NEGOTIATE", "COMM", "SYNCHRONIZE"}
    ys = {y for t in fig.data for y in t.y}
    assert ys and all(y.startswith("r1 ") for y in ys)
    lo, hi = fig.layout.xaxis.range
    assert lo == 0 and hi == pytest.approx(straggler.run.headline()["duration_ms"])   # 545 ms, not ~2,040


def test_compare_figures_show_both_runs(straggler, legacy):
    both = [("A", straggler.run.stragglers()), ("B", legacy.run.stragglers())]
    assert [t.name for t in figures.straggler_compare(both).data] == ["A", "B"]
    both = [("A", straggler.run.op_bandwidth()), ("B", legacy.run.op_bandwidth())]
    assert [t.name for t in figures.bandwidth_compare(both).data] == ["A (ALLREDUCE)", "B (ALLREDUCE)"]


def test_step_time_figure_is_capped():
    steps = np.arange(5000)
    st = pd.DataFrame({"rank": np.repeat(np.arange(64), len(steps)), "step": np.tile(steps, 64),
                       "dur_ns": 1_000_000})
    fig = figures.step_time_figure(st)
    assert len(fig.data) == 64
    assert sum(len(t.x) for t in fig.data) <= figures.MAX_STEP_POINTS + 64


def test_a_thousand_ranks_draw_as_a_spread_thin_rows_and_their_outliers():
    from viewer.dashboard import outliers

    rng = np.random.default_rng(0)
    ranks, steps = np.arange(1024), np.arange(20)
    late = pd.DataFrame(rng.uniform(0, 1e6, (1024, 20)), index=ranks, columns=steps)
    late.loc[700] += 30e6   # the planted straggler
    top = outliers.ranked(late)
    assert top["rank"].iloc[0] == 700 and len(top) == outliers.TOP and top["mean_ns"].is_monotonic_decreasing
    assert not len(outliers.ranked(pd.DataFrame(np.ones((3, 2)))))   # nothing stands out: no list
    order, opening = outliers.timeline_ranks(list(ranks), [700, 5])
    assert order[:3] == [700, 5, 0] and sorted(order) == list(ranks) and opening == order[:outliers.OPEN_LANES]
    assert outliers.timeline_ranks([0, 1, 2], [2])[1] is None   # a small run opens on every rank
    fig = figures.rank_step_heatmap(late)
    assert fig.layout.height == figures.MAX_HEATMAP_PX and fig.data[0].ygap == 0 and fig.layout.yaxis.tickvals is None
    st = pd.DataFrame({"rank": np.repeat(ranks, 20), "step": np.tile(steps, 1024), "dur_ns": 1e6})
    st.loc[st["rank"] == 700, "dur_ns"] = 2e6
    fig = figures.step_time_figure(st, late=700, outliers=[700, 3])
    assert [t.name for t in fig.data] == [None, "10-90 % of ranks", "median rank", "slowest rank", "rank 700 (late)",
                                          "rank 3"]
    assert max(fig.data[3].y) == 2.0 and fig.data[2].y[0] == 1.0


def _text(components) -> str:
    return json.dumps(components, cls=plotly.utils.PlotlyJSONEncoder)


def test_kineto_run_shows_its_gpu_time_and_says_why_the_rest_is_missing(straggler):
    from viewer.dashboard import overview

    assert '"ov-kineto"' not in _text(overview.body(straggler))   # our runtime's run has no GPU table
    path = SHARED / "kineto_traces" / "pair_128rank_job"
    if not path.is_dir():
        pytest.skip(f"real Kineto trace {path} is absent (../shared not mounted)")
    held = Registry().add_path(path)
    text = _text(overview.body(held))
    assert '"ov-kineto"' in text and '"ov-kineto-overlap"' in text
    # its rank x step heatmap: step time and exposed NCCL time (torch.profiler's steps); no negotiation, no lateness
    assert list(held.matrices) == ["step", "exposed"] and '"ov-heatmap"' in _text(overview.charts(held))
    steps = held.run.kineto_steps()
    assert held.matrices["exposed"].loc[0].sum() == pytest.approx(
        steps[(steps["rank"] == 0) & (steps["step"] >= 0)]["exposed_comm_ns"].astype(float).sum())
    for v in held.run.kineto_overlap()["overlap_pct"]:   # the declared table's figures, as summarize prints them
        assert f'"{units.pct(v)}"' in text
    bd = _text(pages.breakdown(held))   # no runtime phases: said in words, and the per-step table instead
    assert "needs a Horovod-style runtime" in bd and '"bd-kineto-table"' in bd
    assert "needs a Horovod-style runtime" in _text(pages.fusion(held))


def test_a_phase_of_the_phase_table_shows_on_the_breakdown_and_the_timeline(tmp_path):
    """CHECKPOINT, one row of viewer/vocab.py's phase table: its bar segment and its timeline colour."""
    from tests.viewer.phase_runs import write_run
    from viewer.dashboard.timeline_agg import PHASES

    held = Registry().add_path(write_run(tmp_path / "ckpt", steps=4, checkpoint_ms={1: 30}, seed=3))
    bars = {t.name: dict(zip(t.x, t.y)) for t in figures.breakdown_bars(held.run.breakdown()).data}
    assert bars["checkpoint"]["rank 1"] > 25 and bars["checkpoint"]["rank 0"] == 0
    trace = next(t for t in timeline_figure(held.timeline.window(ranks=[1])).data if t.name == "CHECKPOINT")
    assert trace.marker.color == PHASES["CHECKPOINT"] and len(trace.base) >= 3
