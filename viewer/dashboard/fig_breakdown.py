"""Breakdown figure: where each rank's step went, as stacked bars (mean per step, ms)."""
from __future__ import annotations

import plotly.graph_objects as go

from viewer.dashboard.theme import BUCKETS


def breakdown_bars(by_rank) -> go.Figure:
    """One stacked bar per rank: data wait, forward, backward, optimizer, exposed comm, other; a rank
    without phase spans shows its compute as "phases unknown" (never split by guess)."""
    fig = go.Figure()
    if by_rank is None or not len(by_rank) or by_rank["other_ns"].isna().all():
        fig.add_annotation(text="no STEP spans: the breakdown needs steps (hvd.mark_step or the optimizer)",
                           showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    else:
        d = by_rank[by_rank["other_ns"].notna()]
        ranks = [f"rank {int(r)}" for r in d["rank"]]
        known = d["phases_known"].to_numpy(dtype=bool)
        for col, (label, colour) in BUCKETS.items():
            ms = d[col].astype("float64").fillna(0.0) / 1e6
            if col == "other_ns":   # what no phase covered; on a rank without phases: all its compute
                fig.add_trace(go.Bar(name="phases unknown", x=ranks, y=ms.where(~known, 0.0).tolist(),
                                     marker_color="#c7c7c7", marker_pattern_shape="/",
                                     hovertemplate="%{x}: %{y:.2f} ms<extra>phases unknown</extra>"))
                ms = ms.where(known, 0.0)
            fig.add_trace(go.Bar(name=label, x=ranks, y=ms.tolist(), marker_color=colour,
                                 hovertemplate="%{x}: %{y:.2f} ms<extra>" + label + "</extra>"))
    fig.update_layout(title={"text": "Where the step went, mean per step (adds up to the step)", "font": {"size": 13}},
                      barmode="stack", yaxis={"title": "ms per step"}, height=340, template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 40, "b": 40},
                      legend={"orientation": "h", "y": -0.15, "traceorder": "normal"})
    return fig
