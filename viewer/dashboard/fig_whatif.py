"""What-if page figures: step time per step (measured, baseline, predicted) and one step's
predicted and measured timelines side by side."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viewer import units

COLOURS = {"compute": "#4c78a8", "wait": "#e45756", "comm": "#54a24b", "phase": "#b279a2"}


def steps_figure(rows) -> go.Figure:
    fig = go.Figure()
    x = [r["step"] for r in rows]
    for key, name, dash in (("measured_ms", "measured", "solid"), ("baseline_ms", "replayed (run's settings)", "dot"),
                            ("predicted_ms", "predicted", "solid")):
        fig.add_trace(go.Scatter(x=x, y=[r[key] for r in rows], mode="lines+markers", name=name,
                                 line={"dash": dash}))
    fig.update_layout(title={"text": "Step time: measured, replayed and predicted", "font": {"size": 13}},
                      xaxis={"title": "step", "tickformat": "d", "dtick": max(1, -(-len(x) // 12))},
                      yaxis={"title": "ms", "rangemode": "tozero"},
                      height=300, template="plotly_white", margin={"l": 60, "r": 20, "t": 40, "b": 40})
    return fig


def timeline_figure(tl) -> go.Figure:
    """Two panels, predicted then measured: a bar per compute/wait/phase span on the rank's row and
    per collective on the rank's comm row."""
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("predicted", "measured"))
    seen = set()
    for col, source in ((1, "predicted"), (2, "measured")):
        d = tl[tl["source"] == source]
        for kind, g in d.groupby(d["lane"].where(d["lane"] != "framework", d["name"])):
            colour = COLOURS.get(kind, "#888")
            ylab = [f"rank {r} {'comm' if lane == 'comm' else ('phase' if lane == 'phase' else '')}".strip()
                    for r, lane in zip(g["rank"], g["lane"])]
            fig.add_trace(go.Bar(x=(g["end_ms"] - g["start_ms"]).tolist(), base=g["start_ms"].tolist(), y=ylab,
                                 orientation="h", name=kind, legendgroup=kind, showlegend=kind not in seen,
                                 marker={"color": colour}, textposition="none", hoverinfo="text",
                                 text=[f"{n}: {units.fmt(a, 'ms')} + {units.fmt(b - a, 'ms')}"
                                       for n, a, b in zip(g["name"], g["start_ms"], g["end_ms"])]),
                          row=1, col=col)
            seen.add(kind)
    fig.update_layout(title={"text": "One step, predicted beside measured (ms since the step began)",
                             "font": {"size": 13}}, barmode="overlay", height=120 + 40 * tl["rank"].nunique() * 2,
                      template="plotly_white", margin={"l": 90, "r": 20, "t": 60, "b": 40})
    fig.update_yaxes(autorange="reversed")
    return fig
