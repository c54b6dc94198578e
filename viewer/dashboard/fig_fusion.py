"""Fusion page figures over ``run.fusion_ops()`` (the allreduces of the lowest rank, as ``run.fusion()``):
fill against the threshold, tensors per op, memcpy share (pre-binned histograms)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viewer import units

_LAYOUT = {"height": 320, "margin": {"l": 60, "r": 20, "t": 40, "b": 40}, "template": "plotly_white"}


def _bars(values, edges, scale: float, colour: str, what: str) -> go.Bar:
    counts, edges = np.histogram(values, bins=edges)
    return go.Bar(x=(edges[:-1] + edges[1:]) / 2 * scale, y=counts, width=np.diff(edges) * scale,
                  marker_color=colour, name="fused ops", hovertemplate=what + ": %{y} ops<extra></extra>")


def fill_histogram(ops, threshold) -> go.Figure:
    """Fused ops by fill ratio (bytes / fusion threshold); the threshold is the line at 1.0."""
    vals = np.clip(ops["fill_ratio"].dropna().to_numpy(float), 0, 1.2)
    fig = go.Figure(_bars(vals, np.linspace(0, 1.2, 25), 1.0, "#72b7b2", "fill %{x:.2f}"))
    fig.add_vline(x=1.0, line_dash="dash", line_color="#e45756", annotation_text=f"threshold {units.size(threshold)}")
    return fig.update_layout(title={"text": "Fill ratio of fused ops (bytes / fusion threshold)", "font": {"size": 13}},
                             xaxis={"title": "fill ratio"}, yaxis={"title": "ops"}, bargap=0.05, **_LAYOUT)


def count_histogram(ops, threshold) -> go.Figure:
    """Fused ops by number of tensors fused."""
    values, n = np.unique(ops["count"].to_numpy(int), return_counts=True)
    fig = go.Figure(go.Bar(x=values, y=n, marker_color="#4c78a8",
                           hovertemplate="%{x} tensors: %{y} ops<extra></extra>"))
    title = "Tensors per fused op" + (f" (threshold {units.size(threshold)})" if threshold == threshold else "")
    return fig.update_layout(title={"text": title, "font": {"size": 13}}, xaxis={"title": "tensors fused"},
                             yaxis={"title": "ops"}, **_LAYOUT)


def memcpy_share_histogram(ops) -> go.Figure:
    """Share of each fused op spent copying into and out of the fusion buffer."""
    vals = np.clip(ops["memcpy_share"].dropna().to_numpy(float), 0, 1)
    fig = go.Figure(_bars(vals, np.linspace(0, 1, 21), 100.0, "#b279a2", "%{x:.0f} %"))
    return fig.update_layout(title={"text": "Memcpy share of each fused op", "font": {"size": 13}},
                             xaxis={"title": "% of op time in memcpy in/out"}, yaxis={"title": "ops"}, **_LAYOUT)
