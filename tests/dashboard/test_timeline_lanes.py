"""The timeline's lanes on real runs, without a browser: one lane a rank until expanded, step labels, the late
rank marked, torch.profiler lanes named by stream and thread, flows, and the window exported for Perfetto."""
import json

import numpy as np
import pandas as pd
import pytest

from tests.dashboard.conftest import SAMPLES, SHARED
from viewer.dashboard.callbacks_timeline import figure, window_trace
from viewer.dashboard.fig_timeline import MAX_FLOWS
from viewer.dashboard.registry import Registry
from viewer.dashboard.timeline_agg import RANK, TimelineIndex

KINETO = SHARED / "kineto_traces" / "nccl_2rank"


@pytest.fixture(scope="module")
def straggler():
    """The real 4-rank sample run with rank 3 slowed."""
    return Registry().add_path(SAMPLES / "straggler")


@pytest.fixture(scope="module")
def kineto():
    if not KINETO.is_dir():
        pytest.skip(f"real Kineto trace {KINETO} is absent (../shared not mounted)")
    return Registry().add_path(KINETO)


def _named(items, prefix):
    return [x.name for x in items if (x.name or "").startswith(prefix)]


def test_a_lane_per_rank_step_labels_and_the_late_rank_marked(straggler):
    run = straggler.run
    fig = figure(straggler)
    lanes = [f"r{r} {RANK}" for r in range(4)]
    assert list(fig.layout.yaxis.categoryarray) == lanes[::-1]
    assert run.headline()["late_rank"] == 3   # the straggler analysis' answer, marked on its lane
    assert list(fig.layout.yaxis.ticktext) == lanes[:3] + [f"<b>{lanes[3]} · late</b>"]
    (band,) = [s for s in fig.layout.shapes if s.name == "late-rank-3"]
    assert band.y0 == pytest.approx(-0.5) and band.y1 == pytest.approx(0.5)   # the bottom lane
    st = run.step_times()
    origin = straggler.timeline.t_min
    starts = {f"step {s}": (t - origin) / 1e6 for s, t in st.groupby("step")["start_ns"].min().items()}
    labels = {a.text: a.x for a in fig.layout.annotations if (a.name or "").startswith("step-label-")}
    assert labels == pytest.approx(starts) and len(labels) == 5
    fig = figure(straggler, critical=["on"])   # the late rank's threads shown, the others' one lane each
    path = {y for y in next(t for t in fig.data if t.name == "critical path").y if y}
    assert path <= set(fig.layout.yaxis.categoryarray) and "r3 framework ·1" in path   # through its phases
    assert f"r3 {RANK}" not in fig.layout.yaxis.categoryarray and f"r0 {RANK}" in fig.layout.yaxis.categoryarray


def test_a_rank_expanded_shows_its_threads_and_flows_to_the_fused_responses(straggler):
    step = straggler.run.step_times().query("step == 1")
    win = [int(step["start_ns"].min()), int(step["end_ns"].max())]
    fig = figure(straggler, window=win, expand=[3])
    lanes = list(fig.layout.yaxis.categoryarray)[::-1]
    assert lanes[:3] == [f"r{r} {RANK}" for r in range(3)]
    # framework: the step, its phases, the waits within them (SYNCHRONIZE in OPTIMIZER_STEP)
    assert lanes[3:] == ["r3 framework", "r3 framework ·1", "r3 framework ·2", "r3 tensor", "r3 tensor ·1",
                         "r3 fusion", "r3 fusion ·1", "r3 backend", "r3 backend ·1"]
    (band,) = [s for s in fig.layout.shapes if s.name == "late-rank-3"]
    assert band.y1 - band.y0 == pytest.approx(9)   # every lane of the late rank
    flows = next(t for t in fig.data if t.name == "submission → fused response")
    ys = [y for y in flows.y if y is not None]
    xs = np.array([x for x in flows.x if x is not None]).reshape(-1, 2)
    assert ys[::2] == ["r3 tensor"] * len(xs) and ys[1::2] == ["r3 fusion"] * len(xs)
    assert 0 < len(xs) <= MAX_FLOWS and (xs[:, 0] <= xs[:, 1]).all()   # submitted, then run


def test_64_ranks_open_with_a_lane_each(straggler):
    ev = straggler.run.events
    big = pd.concat([ev.assign(rank=ev["rank"] + 4 * k) for k in range(16)], ignore_index=True)
    view = TimelineIndex(big).window(px=1400, max_bars=8000)
    assert view.lanes == [f"r{r} {RANK}" for r in range(64)]
    assert 0 < view.n_bars <= 8000


def test_kineto_lanes_are_named_by_stream_and_thread_and_cpu_spans_by_kind(kineto):
    idx = kineto.timeline
    labels = [ln.label for ln in idx.lanes]
    # the CPU threads by the names the trace's thread_name metadata gives them (torch names tid 2919752 twice:
    # the last name holds); a thread it leaves unnamed keeps its id
    assert {"r0 stream 7", "r0 stream 40", "r0 stream 7 annotations", "r0 pt_main_thread", "r0 pt_autograd_0",
            "r0 thread -549452224"} <= set(labels)
    assert not any("cpu:" in lab or "gpu:" in lab for lab in labels)
    gpu40 = next(ln for ln in idx.lanes if ln.label == "r0 stream 40")
    assert len(gpu40.start) == 21   # the NCCL kernels, one lane, no overlap
    assert idx.window(px=800).lanes == [f"r0 {RANK}"]
    assert kineto.run.meta["thread_names"] == {"0": {"cpu:2910249": "pt_main_thread", "cpu:2919752": "pt_autograd_0"}}
    view = idx.window(px=100_000, max_bars=100_000, expand=[0])
    by_lane = {p: set(d["y"]) for p, d in view.bars.items()}
    assert by_lane["GPU NCCL"] == {"r0 stream 40"}
    assert {"CPU op", "CUDA runtime", "FORWARD", "BACKWARD", "OPTIMIZER_STEP"} <= set(by_lane)
    assert by_lane["other"] == {"r0 profiler"}   # torch.profiler's own span: no CPU span is "other"
    fig = figure(kineto)
    assert [a.text for a in fig.layout.annotations if (a.name or "").startswith("step-label-")] == \
        [f"step {s}" for s in (4, 5, 6)]   # ProfilerStep#4..6


def test_kineto_launch_calls_flow_to_their_gpu_work_in_a_window_within_the_budget(kineto):
    ev = kineto.run.events
    t0 = int(kineto.run.step_times()["start_ns"].iloc[1])
    win = [t0, t0 + 50_000_000]
    fig = figure(kineto, window=win, expand=[0])
    flows = next(t for t in fig.data if t.name == "launch → GPU")
    gpu = ev[ev["launch_ns"].notna() & (ev["t_ns"] >= win[0]) & (ev["launch_ns"] <= win[1])]
    xs = np.array([x for x in flows.x if x is not None]).reshape(-1, 2)
    assert len(xs) == len(gpu) and 0 < len(xs) <= MAX_FLOWS and (xs[:, 0] <= xs[:, 1]).all()   # launched, then ran
    assert {y.split(" ·")[0] for y in flows.y[0::3]} == {"r0 pt_main_thread"}   # the launching thread's lanes
    assert set(flows.y[1::3]) == {"r0 stream 7", "r0 stream 40"}   # the NCCL kernels' stream among them
    assert flows.hovertext[0].startswith("cudaLaunchKernel → ")
    whole = figure(kineto, expand=[0])   # the whole run: too many to follow, the title says so
    assert "launch → GPU" not in {t.name for t in whole.data}
    assert f"{int(ev['launch_ns'].notna().sum()):,} launch → GPU flows: zoom in" in whole.layout.title.text
    assert "launch → GPU" not in {t.name for t in figure(kineto, window=win).data}   # one lane a rank: none


def test_threads_sharing_a_name_keep_their_ids_and_the_steps_thread_its_role():
    path = SHARED / "kineto_traces" / "pair_128rank_job"   # each rank's two threads are named "python3.8"
    if not path.is_dir():
        pytest.skip(f"real Kineto trace {path} is absent (../shared not mounted)")
    labels = {ln.label.split(" ·")[0] for ln in Registry().add_path(path).timeline.lanes}
    assert {"r0 python3.8 4037 (main)", "r0 python3.8 23695", "r1 python3.8 4045 (main)",
            "r1 python3.8 23704"} <= labels


def _events(data: bytes) -> list:
    trace = json.loads(data)
    return [e for e in trace["traceEvents"] if e["ph"] != "M"]


def test_open_in_perfetto_exports_the_ranks_and_window_shown(straggler):
    st = straggler.run.step_times().query("step == 1")
    t0, t1 = int(st["start_ns"].min()), int(st["end_ns"].max())
    events = _events(window_trace(straggler, t0, t1, ranks=[1, 3]))
    whole = _events(window_trace(straggler))
    assert {e["pid"] for e in events} == {1, 3} and {e["pid"] for e in whole} == {0, 1, 2, 3}
    assert 0 < len(events) < len(whole) / 3
    assert all(e["ts"] * 1000 < t1 and (e["ts"] + e.get("dur", 0)) * 1000 >= t0 for e in events)
    steps = {e["args"]["step"] for e in events if e["name"] == "STEP"}
    assert 1 in steps   # the same axis as the dashboard's: step 1's spans fall in step 1's window


def test_open_in_perfetto_cuts_a_kineto_run_from_its_tables(kineto):
    ev = kineto.run.events
    t0 = int(ev["t_ns"].min())
    events = _events(window_trace(kineto, t0, t0 + 50_000_000))
    assert 0 < len(events) < len(ev) / 4 and {e["pid"] for e in events} == {0}
