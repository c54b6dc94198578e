"""Overview figure: step time per step and rank."""
from __future__ import annotations

import plotly.graph_objects as go

MAX_POINTS = 20_000  # over all ranks


def step_time_figure(spans) -> go.Figure:
    """Duration of every step on every rank (ms); a slow rank or a slow phase of the run stands out."""
    fig = go.Figure()
    n_steps = 0 if spans is None or spans.empty else int(spans["step"].nunique())
    if spans is None or spans.empty:
        fig.add_annotation(text="no training steps recorded (Horovod timelines have none)", showarrow=False,
                           x=0.5, y=0.5, xref="paper", yref="paper")
    else:
        per_rank = max(50, MAX_POINTS // spans["rank"].nunique())
        for rank, d in spans.groupby("rank"):
            d = d.sort_values("step")
            if len(d) > per_rank:
                d = d.iloc[:: -(-len(d) // per_rank)]
            fig.add_trace(go.Scattergl(x=d["step"], y=(d["end_ns"] - d["start_ns"]) / 1e6, mode="lines+markers",
                                       name=f"rank {int(rank)}", marker={"size": 4}))
    fig.update_layout(title={"text": "Step time per rank", "font": {"size": 13}},
                      xaxis={"title": "step", "tickformat": "d", "dtick": max(1, -(-n_steps // 12))},
                      yaxis={"title": "ms", "rangemode": "tozero"}, height=280, template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 40, "b": 40})
    return fig
