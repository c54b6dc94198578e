"""Server-side aggregation of the timeline: bounded output, faithful coverage, exact spans when zoomed."""
import numpy as np
import pytest

from tests.dashboard.conftest import SAMPLES, replicated_run
from viewer.dashboard.timeline_agg import TimelineIndex, _coverage, _on_top


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The real straggler sample run replicated to 4 ranks x 60k events."""
    return replicated_run(tmp_path_factory.mktemp("agg"), 4, 60_000)


@pytest.fixture(scope="module")
def index(run):
    return TimelineIndex(run.events)


def test_coverage_matches_brute_force():
    rng = np.random.default_rng(1)
    s = np.sort(rng.uniform(0, 1000, 300))
    e = s + rng.uniform(0, 20, 300)
    edges = np.linspace(0, 1000, 51)
    fast = _coverage(s, e, edges)
    slow = [sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in zip(s, e)) for lo, hi in zip(edges[:-1], edges[1:])]
    assert np.allclose(fast, slow)


def test_spans_wholly_under_those_drawn_over_them_are_not_sent():
    # drawn in phase order, then by start: 0-10 (phase 1) is under 0-10 (phase 2) and 2-4 under it too;
    # 5-20 (phase 1) shows from 10 to 20; 12-14 (phase 0) is under 5-20, but not 18-30 (phase 0), which passes it
    s, e = np.array([0, 0, 2, 5, 12, 18]), np.array([10, 10, 4, 20, 14, 30])
    ph = np.array([1, 2, 1, 1, 0, 0])
    shown = _on_top(s, e, ph, np.ones(6, dtype=bool), 0, 1.0, 40)
    assert shown.tolist() == [False, True, False, True, False, True]
    assert not _on_top(s, e, ph, np.zeros(6, dtype=bool), 0, 1.0, 40).any()   # only exact spans are drawn


def _spans(ev):
    """The spans the timeline draws: every one but the steps (the axis labels them)."""
    return ev[(ev["ph"] == "X") & (ev["dur_ns"] > 0) & (ev["name"] != "STEP")]


def test_whole_run_stays_under_the_bar_budget(index, run):
    view = index.window(px=1400, max_bars=8000)
    assert view.n_events == len(_spans(run.events)) > 150_000
    assert view.lanes == ["r0 \u25b8", "r1 \u25b8", "r2 \u25b8", "r3 \u25b8"]   # one lane a rank
    assert 0 < view.n_bars <= 8000
    assert sum(len(d["base"]) for d in view.bars.values()) == view.n_bars
    assert view.n_merged_bars > 0  # zoomed out: sub-pixel spans are merged


def test_merged_bars_keep_the_busy_fraction(index, run):
    """A lane's bars, weighted by the busy fraction they encode, add up to its spans' busy time."""
    view = index.window(px=400, expand=[0])
    drawn = 0.0
    for d in view.bars.values():  # a merged bar carries its dominant phase's colour
        lane = np.array(d["y"]) == "r0 backend \u00b71"
        drawn += float((np.asarray(d["width"])[lane] * (np.asarray(d["opacity"])[lane] - 0.25) / 0.75).sum())
    ev = run.events
    sub = ev[(ev["rank"] == 0) & (ev["thread"] == "backend") & (ev["depth"] == 1)]
    true_ms = sub["dur_ns"].sum() / 1e6
    assert drawn == pytest.approx(true_ms, rel=0.05)


def test_zoomed_window_draws_each_span_exactly(index, run):
    ev = run.events
    step = ev[(ev["name"] == "STEP") & (ev["rank"] == 1)].iloc[5]
    t0 = int(step["t_ns"]) + int(step["dur_ns"]) // 2
    t1 = t0 + 5_000_000
    view = index.window(t0, t1, ranks=[1], expand=[1])
    assert view.n_merged_bars == 0
    # framework ·2: the SYNCHRONIZE inside a phase inside the step
    assert all(label.startswith("r1 ") for label in view.lanes) and len(view.lanes) == 9
    sel = _spans(ev)
    sel = sel[(sel["rank"] == 1) & (sel["t_ns"] < t1) & (sel["t_ns"] + sel["dur_ns"] > t0)]
    assert view.n_exact + view.n_hidden == len(sel) and view.n_exact > 0   # each drawn, or wholly under those drawn
    neg = view.bars["NEGOTIATE"]   # drawn in ms since the run's first event
    lo, hi = (t0 - ev["t_ns"].min()) / 1e6, (t1 - ev["t_ns"].min()) / 1e6
    assert min(neg["base"]) >= lo - 1e-9 and max(neg["base"] + neg["width"]) <= hi + 1e-9


def test_million_event_window_payload_is_small(tmp_path):
    import plotly.io as pio

    from viewer.dashboard.fig_timeline import timeline_figure

    big = replicated_run(tmp_path, 8, 125_000)
    view = TimelineIndex(big.events).window(px=1400, max_bars=8000)
    payload = pio.to_json(timeline_figure(view))
    assert view.n_events > 700_000
    assert view.n_bars <= 8000
    assert len(payload) < 3_000_000


def test_nsight_gpu_rows_get_a_lane_per_stream_after_the_runtime_lanes():
    import pandas as pd

    from viewer import Run

    run = Run.load(SAMPLES / "straggler", cache=False)
    comm = run.events[(run.events["name"] == "RING_ALLREDUCE")]
    gpu = comm.assign(thread="gpu:7", name="ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)", depth=0)
    comp = comm.assign(thread="gpu:7", name="volta_sgemm_128x64_nn", t_ns=comm["t_ns"] - 5_000_000,
                       dur_ns=1_000_000, depth=0)
    events = pd.concat([run.events, gpu, comp], ignore_index=True)
    # pixels of a few µs: each span is drawn exactly
    view = TimelineIndex(events).window(ranks=[1], expand=[1], px=1_000_000, max_bars=1_000_000)
    assert view.lanes[-1] == "r1 stream 7" and view.lanes[0] == "r1 framework"
    gpu_nccl = view.bars["GPU NCCL"]
    assert set(gpu_nccl["y"]) == {"r1 stream 7"} and len(gpu_nccl["base"]) == int((comm["rank"] == 1).sum())
    assert set(view.bars["GPU kernel"]["y"]) == {"r1 stream 7"}
