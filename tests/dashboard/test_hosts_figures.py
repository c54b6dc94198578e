"""Hosts as groups on the timeline and the heatmap (issue 31), on the real 2 x 2 sample run
(sample_traces/two-hosts-slow-link) and on a run written by the real recorder with a round-robin
placement (hosts not contiguous in rank order); checked without a browser."""
import pytest

from tests.dashboard.conftest import SAMPLES
from tests.viewer.phase_runs import write_run
from viewer import Run
from viewer.analyses.links import hosts_of
from viewer.dashboard import figures
from viewer.dashboard.fig_timeline import host_runs, timeline_figure
from viewer.dashboard.registry import Registry
from viewer.dashboard.timeline_agg import TimelineIndex


@pytest.fixture(scope="module")
def two_hosts():
    path = SAMPLES / "two-hosts-slow-link"
    if not any(path.glob("*.json.gz")):
        pytest.skip("sample_traces/two-hosts-slow-link is empty: run `bash sample_traces/regenerate.sh "
                    "two-hosts-slow-link` (root)")
    return Registry().add_path(path)


def _named(items, prefix):
    return [x.name for x in items if (x.name or "").startswith(prefix)]


def test_timeline_groups_lanes_by_host_with_rule_and_labels(two_hosts):
    hosts = hosts_of(two_hosts.run.ranks)
    assert hosts == {0: "h0", 1: "h0", 2: "h1", 3: "h1"}
    win = two_hosts.timeline.window(px=800)
    ranks = [int(lane.split()[0][1:]) for lane in win.lanes]
    assert win.hosts == [hosts[r] for r in ranks]
    assert host_runs(win.hosts) == [("h0", 0, ranks.index(2) - 1), ("h1", ranks.index(2), len(ranks) - 1)]
    fig = timeline_figure(win)
    assert _named(fig.layout.annotations, "host-label-") == ["host-label-h0", "host-label-h1"]
    (rule,) = [s for s in fig.layout.shapes if s.name == "host-rule-h1"]
    # the rule lies between rank 1's last lane and rank 2's first (the axis lists lanes bottom up)
    assert rule.y0 == pytest.approx(len(ranks) - 1 - ranks.index(2) + 0.5)
    assert _named(fig.layout.shapes, "host-band-") == ["host-band-h1"]


def test_one_host_run_has_no_host_groups():
    run = Registry().add_path(SAMPLES / "straggler")
    fig = timeline_figure(run.timeline.window(px=400))
    assert not fig.layout.annotations or not _named(fig.layout.annotations, "host-label-")
    assert not _named(fig.layout.shapes, "host-")


def test_heatmap_names_hosts_and_rules_between_them(two_hosts):
    fig = figures.rank_step_heatmap(two_hosts.run.lateness(), hosts_of(two_hosts.run.ranks))
    assert list(fig.data[0].y) == [0, 1, 2, 3]   # still rank numbers: a click opens that rank
    assert list(fig.layout.yaxis.ticktext) == ["0 (h0)", "1 (h0)", "2 (h1)", "3 (h1)"]
    (rule,) = fig.layout.shapes
    assert rule.name == "host-rule-h1" and rule.y0 == rule.y1 == 1.5
    assert "on %{customdata}" in fig.data[0].hovertemplate


def test_round_robin_hosts_group_lanes_out_of_rank_order(tmp_path):
    run = Run.load(write_run(tmp_path / "rr", steps=3, hosts=["h0", "h1", "h0", "h1"]), cache=False)
    idx = TimelineIndex(run.events, {0: "h0", 1: "h1", 2: "h0", 3: "h1"})
    win = idx.window(px=400)
    order = list(dict.fromkeys(int(lane.split()[0][1:]) for lane in win.lanes))
    assert order == [0, 2, 1, 3] and host_runs(win.hosts)[0][0] == "h0"
    fig = figures.rank_step_heatmap(run.lateness(), {0: "h0", 1: "h1", 2: "h0", 3: "h1"})
    assert len(fig.layout.shapes) == 3   # every neighbouring pair of ranks is on two hosts
