"""Negotiation page figures: the rank x step lateness heatmap (``run.lateness()``) and how often each rank
was last (``run.stragglers()``)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viewer import units

MAX_STEP_COLUMNS = 600


def lateness_heatmap(matrix, hosts: dict | None = None) -> go.Figure:
    """Heatmap of the mean lateness behind the first ready rank (``matrix`` in ns; drawn in ms); rows ranks,
    columns steps.

    More than MAX_STEP_COLUMNS steps are binned (each column then shows the first step of its bin).
    With ``hosts`` (``{rank: host}``, two or more hosts) each row names its host and a rule separates
    ranks of different hosts.
    """
    fig = go.Figure()
    steps = np.asarray(matrix.columns)
    z = matrix.to_numpy(dtype=float) / 1e6
    if len(steps) > MAX_STEP_COLUMNS:
        k = -(-len(steps) // MAX_STEP_COLUMNS)
        pad = (-len(steps)) % k
        z = np.nanmean(np.pad(z, ((0, 0), (0, pad)), constant_values=np.nan).reshape(len(z), -1, k), axis=2)
        steps = steps[::k]
    ranks = [int(r) for r in matrix.index]
    hosts = hosts if hosts and len(set(hosts.values())) > 1 else {}
    on = [hosts.get(r) or "?" for r in ranks]
    fig.add_trace(go.Heatmap(
        z=z, x=steps, y=ranks, colorscale="Reds", colorbar={"title": "ms late"},
        customdata=[[h] * z.shape[1] for h in on] if hosts else None,
        hovertemplate="rank %{y}" + (" on %{customdata}" if hosts else "")
        + " · step %{x}<br>%{z:.3f} ms behind the first rank<extra></extra>",
        xgap=0, ygap=1))
    for (a, ha), (b, hb) in zip(zip(ranks, on), zip(ranks[1:], on[1:])):
        if hosts and ha != hb:
            fig.add_shape(type="line", xref="paper", yref="y", x0=0, x1=1, y0=(a + b) / 2, y1=(a + b) / 2,
                          line={"color": "#222", "width": 2}, name=f"host-rule-{hb}")
    fig.update_layout(
        title={"text": "Lateness behind the first ready rank (click a cell to open it on the timeline)",
               "font": {"size": 13}},
        xaxis={"title": "step (Horovod timelines: n-th negotiation)"},
        yaxis={"title": "rank (host)" if hosts else "rank", "autorange": "reversed", "tickmode": "array",
               "tickvals": ranks, "ticktext": [f"{r} ({h})" if hosts else str(r) for r, h in zip(ranks, on)],
               "type": "category" if len(ranks) < 2 else "linear", "dtick": 1},
        height=max(260, 30 * len(ranks) + 140), margin={"l": 80 if hosts else 60, "r": 20, "t": 40, "b": 50},
        template="plotly_white")
    return fig


def times_last_bar(last, hosts: dict | None = None) -> go.Figure:
    """Per rank: share of negotiations in which it was last, with the wait it imposed (and its host
    when ``hosts`` names two or more)."""
    fig = go.Figure()
    hosts = hosts if hosts and len(set(hosts.values())) > 1 else {}
    last = last.sort_values("rank")
    fig.add_trace(go.Bar(
        x=[f"rank {int(r)}" + (f" ({hosts.get(int(r), '?')})" if hosts else "") for r in last["rank"]],
        y=last["pct_last"], marker_color="#e45756",
        customdata=np.c_[last["times_last"], [units.pct(p) for p in last["pct_last"]],
                         [units.duration(w) for w in last["wait_imposed_ns"]]],
        hovertemplate="%{x}: last in %{customdata[0]} negotiations (%{customdata[1]})<br>"
                      "imposed %{customdata[2]} of waiting on the others<extra></extra>"))
    fig.update_layout(title={"text": "How often each rank was the last one ready", "font": {"size": 13}},
                      yaxis={"title": "% of negotiations", "rangemode": "tozero"},
                      height=300, margin={"l": 60, "r": 20, "t": 40, "b": 40}, template="plotly_white")
    return fig
