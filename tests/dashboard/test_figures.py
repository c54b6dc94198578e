"""Figure builders are plain functions from tables to plotly figures: checked without a browser."""
import pytest

from tests.dashboard.conftest import horovod_file
from viewer.dashboard import derive, fig_comm, fig_compare, fig_fusion, fig_negotiation
from viewer.dashboard.fig_timeline import timeline_figure
from viewer.dashboard.registry import Registry
from viewer.dashboard.synthetic import make_run


@pytest.fixture(scope="module")
def synthetic():
    return Registry().add_tables(make_run(40_000, ranks=4, slow_rank=3), "synthetic")


@pytest.fixture(scope="module")
def legacy():
    return Registry().add_path(horovod_file("legacy_nccl_fused_7ranks.json"))


def test_heatmap_has_a_row_per_rank_and_marks_the_straggler(synthetic):
    matrix = derive.lateness_matrix(synthetic.late)
    fig = fig_negotiation.lateness_heatmap(matrix)
    hm = fig.data[0]
    assert list(hm.y) == [0, 1, 2, 3]
    assert hm.z.shape == (4, matrix.shape[1])
    assert matrix.mean(axis=1).idxmax() == 3  # the planted slow rank is the latest row


def test_heatmap_bins_many_steps():
    import numpy as np
    import pandas as pd

    m = pd.DataFrame(np.ones((2, 1500)), index=[0, 1], columns=range(1500))
    hm = fig_negotiation.lateness_heatmap(m).data[0]
    assert len(hm.x) <= fig_negotiation.MAX_STEP_COLUMNS


def test_real_horovod_timeline_names_rank_7_as_straggler(legacy):
    fig = fig_negotiation.times_last_bar(legacy.stragglers)
    times = dict(zip(fig.data[0].x, fig.data[0].customdata[:, 0]))
    assert max(times, key=times.get) == "rank 7"
    assert dict(zip(fig.data[0].x, fig.data[0].y))["rank 7"] > 90
    assert legacy.headline()["straggler_rank"] == 7


def test_fusion_histograms_mark_the_threshold(synthetic):
    fus, thr = synthetic.fusion, derive.fusion_threshold(synthetic.tables)
    fill = fig_fusion.fill_histogram(fus, thr)
    assert thr == 64 << 20
    assert any(s.x0 == 1.0 for s in fill.layout.shapes)  # the threshold line
    assert sum(fill.data[0].y) == len(fus)
    counts = fig_fusion.count_histogram(fus, thr)
    assert list(counts.data[0].x) == [8] and "64.0 MiB" in counts.layout.title.text
    memcpy = fig_fusion.memcpy_share_histogram(fus)
    assert sum(memcpy.data[0].y) == len(fus)


def test_busbw_figure_has_fit_and_peak(synthetic):
    comm = synthetic.comm
    fits = derive.alpha_beta(comm)
    alpha_us, beta = fits["ring ALLREDUCE"]
    assert alpha_us == pytest.approx(80, rel=0.05)      # planted: 80 us latency
    assert beta == pytest.approx(2.0 / 1.5, rel=0.05)   # planted: 1.5 s/GB per byte -> 1.33 GB/s
    fig = fig_comm.busbw_figure(comm, fits, 3.0, peak_given=True)
    names = [t.name for t in fig.data]
    assert any(n.startswith("ring ALLREDUCE fit") for n in names)
    assert any(s.y0 == 3.0 for s in fig.layout.shapes)
    assert len(fig.data[0].x) <= fig_comm.MAX_POINTS
    table = derive.nccl_table(comm)
    assert list(table.columns[:4]) == ["size", "count", "type", "op"]
    assert (table["busbw"] / table["algbw"]).round(3).eq(1.5).all()  # 2(n-1)/n for 4 ranks


def test_timeline_figure_lanes_and_phases(synthetic):
    view = synthetic.timeline.window(ranks=[1])
    fig = timeline_figure(view)
    assert {t.name for t in fig.data} >= {"NEGOTIATE", "COMM", "SYNCHRONIZE"}
    ys = {y for t in fig.data for y in t.y}
    assert ys and all(y.startswith("r1 ") for y in ys)


def test_compare_figures_show_both_runs(synthetic, legacy):
    fig = fig_compare.straggler_compare(synthetic.stragglers, legacy.stragglers, "A", "B")
    assert [t.name for t in fig.data] == ["A", "B"]
    fig = fig_compare.bandwidth_compare(synthetic.comm, legacy.comm, "A", "B")
    assert [t.name for t in fig.data] == ["A (ALLREDUCE)", "B (ALLREDUCE)"]


def test_headline_numbers_of_the_synthetic_run(synthetic):
    h = synthetic.headline()
    assert h["step_ms"] == pytest.approx(120, rel=0.01)
    assert 0 < h["exposed_pct"] < 100
    assert h["straggler_rank"] == 3 and h["straggler_share"] > 0.9
    assert 0 < h["busbw_eff"] <= 1


def test_step_time_figure_is_capped():
    import numpy as np
    import pandas as pd

    from viewer.dashboard import fig_overview

    steps = np.arange(5000)
    spans = pd.DataFrame({"rank": np.repeat(np.arange(64), len(steps)), "step": np.tile(steps, 64),
                          "start_ns": 0, "end_ns": 1_000_000})
    fig = fig_overview.step_time_figure(spans)
    assert len(fig.data) == 64
    assert sum(len(t.x) for t in fig.data) <= fig_overview.MAX_POINTS + 64
