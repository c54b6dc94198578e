"""The Compare page's waterfall: A's step, each phase's change, B's step (``ringscope diff``'s phases)."""
from __future__ import annotations

import plotly.graph_objects as go

from viewer.dashboard.figures import COLOURS, _styled


def phase_waterfall(d: dict) -> go.Figure:
    """From A's step time through each phase's change (they sum to the change) to B's step time, in ms."""
    x = ["A's step", *[p["phase"] for p in d["phases"]], "B's step"]
    y = [d["a"]["step_ms"], *[p["delta_ms"] for p in d["phases"]], d["b"]["step_ms"]]
    fig = go.Figure(go.Waterfall(x=x, y=y, measure=["absolute", *["relative"] * len(d["phases"]), "total"],
                                 text=[f"{v:+.2f}" if 0 < i < len(y) - 1 else f"{v:.2f}" for i, v in enumerate(y)],
                                 textposition="outside", connector={"line": {"color": "#999999"}},
                                 increasing={"marker": {"color": "#e45756"}},
                                 decreasing={"marker": {"color": COLOURS[2]}},
                                 totals={"marker": {"color": COLOURS[0]}}, showlegend=False))
    return _styled(fig, "Where the step change went (ms per step; slower red, faster green)",
                   yaxis={"title": "ms"})
