"""The critical path drawn over the timeline: a thick line through the spans that set each step."""
from __future__ import annotations

import plotly.graph_objects as go

from viewer import units
from viewer.dashboard.timeline_agg import STEP_DEPTH, lane_label

MAX_STEPS = 200   # paths drawn per window (the widest windows hold the most steps)
COLOUR = "#111111"


def path_lanes(path):
    """The timeline lane of each critical-path row (a pre-submit row lies on its rank's STEP lane)."""
    return [lane_label(int(r), str(t), STEP_DEPTH if k == "pre-submit" else int(d))
            for r, t, d, k in zip(path["rank"], path["thread"], path["depth"], path["kind"])]


def add_critical_path(fig: go.Figure, path, win) -> go.Figure:
    """Add the path of every step overlapping the window ``win`` whose lanes are shown: each span as a
    segment on its lane, joined in order; the pre-submit phase that made the step's last rank late gets a
    marker."""
    if not len(path):
        return fig
    lanes, t0_ns, t1_ns, origin = win.lanes, win.t0_ns, win.t1_ns, win.origin_ns
    shown = set(lanes)
    p = path.assign(lane=path_lanes(path))
    span = p.groupby("step").agg(lo=("start_ns", "min"), hi=("end_ns", "max"))
    steps = span[(span["hi"] >= t0_ns) & (span["lo"] <= t1_ns)].index[:MAX_STEPS]
    p = p[p["step"].isin(steps) & p["lane"].isin(shown)].sort_values(["step", "order"])
    xs, ys, text = [], [], []
    for _, g in p.groupby("step", sort=True):
        for r in g.itertuples(index=False):
            label = f"step {r.step} · rank {r.rank} · {r.kind}: {r.name} ({units.duration(r.dur_ns)})"
            xs += [(r.start_ns - origin) / 1e6, (r.end_ns - origin) / 1e6]
            ys += [r.lane, r.lane]
            text += [label, label]
        xs.append(None)
        ys.append(None)
        text.append(None)
    if not xs:
        return fig
    fig.add_trace(go.Scatter(name="critical path", x=xs, y=ys, mode="lines+markers", hovertext=text,
                             hoverinfo="text", line={"color": COLOUR, "width": 4},
                             marker={"size": 7, "color": COLOUR}, connectgaps=False))
    slow = p[p["slowest"]]
    if len(slow):
        mid = (slow["start_ns"] + slow["end_ns"]) / 2 - origin
        fig.add_trace(go.Scatter(name="slowest phase", x=(mid / 1e6).tolist(),
                                 y=slow["lane"].tolist(), mode="markers", hoverinfo="text",
                                 hovertext=[f"step {s}: rank {r}'s {n}, furthest over the others'"
                                            for s, r, n in zip(slow["step"], slow["rank"], slow["name"])],
                                 marker={"symbol": "star", "size": 14, "color": "#ffbf00",
                                         "line": {"color": COLOUR, "width": 1}}))
    return fig
