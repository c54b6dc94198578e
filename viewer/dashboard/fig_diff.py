"""The Compare page's waterfall: A's step, each phase's change, B's step (``ringscope diff``'s phases), drawn as
floating bars (the dashboard's plotly.js bundle has no waterfall trace: viewer/dashboard/assets)."""
from __future__ import annotations

import plotly.graph_objects as go

from viewer.dashboard.figures import COLOURS, _styled

SLOWER, FASTER = "#e45756", COLOURS[2]


def phase_waterfall(d: dict) -> go.Figure:
    """From A's step time through each phase's change (they sum to the change) to B's step time, in ms: each change
    a bar from where the previous ones left the step."""
    x = ["A's step", *[p["phase"] for p in d["phases"]], "B's step"]
    y = [d["a"]["step_ms"], *[p["delta_ms"] for p in d["phases"]], d["b"]["step_ms"]]
    level, base = y[0], [0.0]
    for delta in y[1:-1]:
        base.append(level)
        level += delta
    base.append(0.0)
    colours = [COLOURS[0], *[SLOWER if v > 0 else FASTER for v in y[1:-1]], COLOURS[0]]
    fig = go.Figure(go.Bar(x=x, y=y, base=base, marker={"color": colours}, showlegend=False,
                           text=[f"{v:+.2f}" if 0 < i < len(y) - 1 else f"{v:.2f}" for i, v in enumerate(y)],
                           textposition="outside",
                           hovertemplate="%{x}: %{text} ms<extra></extra>"))
    return _styled(fig, "Where the step change went (ms per step; slower red, faster green)",
                   yaxis={"title": "ms"})
