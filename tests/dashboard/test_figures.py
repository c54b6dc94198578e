"""Figure builders are plain functions from tables to plotly figures: checked without a browser."""
import pytest

from tests.dashboard.conftest import SAMPLES, horovod_file
from viewer.dashboard import derive, fig_comm, fig_compare, fig_fusion, fig_negotiation
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
    matrix = derive.lateness_matrix(straggler.late)
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


def test_fusion_histograms_mark_the_threshold(straggler):
    fus, thr = straggler.fusion, derive.fusion_threshold(straggler.tables)
    fill = fig_fusion.fill_histogram(fus, thr)
    assert thr == straggler.tables.meta["fusion_threshold"] == 128 << 20
    assert any(s.x0 == 1.0 for s in fill.layout.shapes)  # the threshold line
    assert sum(fill.data[0].y) == len(fus)
    counts = fig_fusion.count_histogram(fus, thr)
    assert list(counts.data[0].x) == sorted(fus["count"].unique()) and "128.0 MiB" in counts.layout.title.text
    memcpy = fig_fusion.memcpy_share_histogram(fus)
    assert sum(memcpy.data[0].y) == len(fus)


def test_busbw_figure_has_fit_and_peak(straggler):
    comm = straggler.comm
    fits = derive.alpha_beta(comm)
    alpha_us, beta = fits["ring ALLREDUCE"]
    assert alpha_us > 0 and beta > 0                   # a latency and a time per byte from the real run
    fig = fig_comm.busbw_figure(comm, fits, 3.0, peak_given=True)
    names = [t.name for t in fig.data]
    assert any(n.startswith("ring ALLREDUCE fit") for n in names)
    assert any(s.y0 == 3.0 for s in fig.layout.shapes)
    assert len(fig.data[0].x) <= fig_comm.MAX_POINTS
    table = derive.nccl_table(comm)
    assert list(table.columns[:4]) == ["size", "count", "type", "op"]
    ratio = (table["busbw"] / table["algbw"]).round(3)
    assert ratio[table["op"] == "ALLREDUCE"].eq(1.5).all()  # 2(n-1)/n for 4 ranks
    assert ratio[table["op"] == "BROADCAST"].eq(1.0).all()


def test_timeline_figure_lanes_and_phases(straggler):
    view = straggler.timeline.window(ranks=[1])
    fig = timeline_figure(view)
    assert {t.name for t in fig.data} >= {"NEGOTIATE", "COMM", "SYNCHRONIZE"}
    ys = {y for t in fig.data for y in t.y}
    assert ys and all(y.startswith("r1 ") for y in ys)


def test_compare_figures_show_both_runs(straggler, legacy):
    fig = fig_compare.straggler_compare(straggler.stragglers, legacy.stragglers, "A", "B")
    assert [t.name for t in fig.data] == ["A", "B"]
    fig = fig_compare.bandwidth_compare(straggler.comm, legacy.comm, "A", "B")
    assert [t.name for t in fig.data] == ["A (ALLREDUCE)", "B (ALLREDUCE)"]


def test_headline_numbers_of_the_straggler_run(straggler):
    h = straggler.headline()
    steps = straggler.tables.events.query("name == 'STEP'")
    assert h["step_ms"] == pytest.approx(steps["dur_ns"].median() / 1e6, rel=0.25)
    assert 0 < h["exposed_pct"] < 100
    assert h["straggler_rank"] == 3 and h["straggler_share"] > 0.8
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
