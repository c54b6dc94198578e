"""Timeline figure: per-lane bars of an aggregated window (see timeline_agg)."""
from __future__ import annotations

import plotly.graph_objects as go

from viewer.dashboard.theme import PHASES


def timeline_figure(view, title: str = "") -> go.Figure:
    """Horizontal bars per phase over the window's lanes; x in ms on the run's time axis."""
    fig = go.Figure()
    for phase, colour in PHASES.items():
        d = view.bars.get(phase)
        if d is None or not len(d["base"]):
            continue
        fig.add_trace(go.Bar(
            name=phase, orientation="h", y=d["y"], base=d["base"], x=d["width"],
            marker={"color": colour, "opacity": d["opacity"], "line": {"width": 0}},
            hovertext=d["text"], hoverinfo="text", width=0.8))
    lanes = list(view.lanes)
    merged = f" · {view.n_merged_bars:,} merged bars" if view.n_merged_bars else ""
    fig.update_layout(
        title={"text": f"{title} {view.n_events:,} spans in window · {view.n_exact:,} drawn exactly{merged}",
               "font": {"size": 13}},
        barmode="overlay", bargap=0.15, showlegend=True, uirevision="timeline",
        height=max(260, 28 * len(lanes) + 120), margin={"l": 130, "r": 20, "t": 40, "b": 40},
        xaxis={"title": "time (ms since run start)", "range": [view.t0_ns / 1e6, view.t1_ns / 1e6]},
        yaxis={"categoryorder": "array", "categoryarray": lanes[::-1], "type": "category",
               "fixedrange": True},
        legend={"orientation": "h", "y": -0.15 if len(lanes) > 6 else -0.3},
        template="plotly_white")
    if not lanes:
        fig.add_annotation(text="no spans in this run", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
    return fig
