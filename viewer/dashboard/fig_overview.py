"""Overview figure: step time per step and rank (``run.step_times()``, whose median is the headline's)."""
from __future__ import annotations

import plotly.graph_objects as go

MAX_POINTS = 20_000  # over all ranks


def step_time_figure(st) -> go.Figure:
    """Duration of every step on every rank (ms); a slow rank or a slow phase of the run stands out."""
    fig = go.Figure()
    per_rank = max(50, MAX_POINTS // st["rank"].nunique())
    for rank, d in st.groupby("rank"):
        if len(d) > per_rank:
            d = d.iloc[:: -(-len(d) // per_rank)]
        fig.add_trace(go.Scattergl(x=d["step"], y=d["dur_ns"] / 1e6, mode="lines+markers", name=f"rank {int(rank)}",
                                   marker={"size": 4}))
    fig.update_layout(title={"text": "Step time per rank", "font": {"size": 13}},
                      xaxis={"title": "step", "tickformat": "d", "dtick": max(1, -(-st["step"].nunique() // 12))},
                      yaxis={"title": "ms", "rangemode": "tozero"}, height=280, template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 40, "b": 40})
    return fig
