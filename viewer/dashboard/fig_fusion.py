"""Fusion page figures: fill ratio and tensors-per-op histograms (pre-binned), memcpy share."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go


def _binned(values, bins):
    counts, edges = np.histogram(values, bins=bins)
    return counts, edges


def fill_histogram(fus, threshold) -> go.Figure:
    """Fused ops by fill ratio (bytes / fusion threshold); the threshold is the line at 1.0."""
    fig = go.Figure()
    vals = fus["fill"].dropna().to_numpy(float) if len(fus) else np.empty(0)
    if len(vals):
        counts, edges = _binned(np.clip(vals, 0, 1.2), np.linspace(0, 1.2, 25))
        fig.add_trace(go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=counts, width=np.diff(edges),
                             marker_color="#72b7b2", name="fused ops",
                             hovertemplate="fill %{x:.2f}: %{y} ops<extra></extra>"))
        fig.add_vline(x=1.0, line_dash="dash", line_color="#e45756",
                      annotation_text=f"threshold {threshold / 2**20:.1f} MiB" if threshold else "threshold")
    else:
        fig.add_annotation(text="no fused ops with a known threshold", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
    fig.update_layout(title={"text": "Fill ratio of fused ops (bytes / fusion threshold)", "font": {"size": 13}},
                      xaxis={"title": "fill ratio"}, yaxis={"title": "ops"}, bargap=0.05,
                      height=320, margin={"l": 60, "r": 20, "t": 40, "b": 40}, template="plotly_white")
    return fig


def count_histogram(fus, threshold) -> go.Figure:
    """Fused ops by number of tensors fused."""
    fig = go.Figure()
    if len(fus):
        counts = fus["count"].to_numpy(int)
        values, n = np.unique(counts, return_counts=True)
        fig.add_trace(go.Bar(x=values, y=n, marker_color="#4c78a8",
                             hovertemplate="%{x} tensors: %{y} ops<extra></extra>"))
    title = "Tensors per fused op"
    if threshold:
        title += f" (threshold {threshold / 2**20:.1f} MiB)"
    fig.update_layout(title={"text": title, "font": {"size": 13}}, xaxis={"title": "tensors fused"},
                      yaxis={"title": "ops"}, height=320, margin={"l": 60, "r": 20, "t": 40, "b": 40},
                      template="plotly_white")
    return fig


def memcpy_share_histogram(fus) -> go.Figure:
    """Share of each fused op spent copying into and out of the fusion buffer."""
    fig = go.Figure()
    vals = fus["memcpy_share"].dropna().to_numpy(float) if len(fus) else np.empty(0)
    if len(vals):
        counts, edges = _binned(np.clip(vals, 0, 1), np.linspace(0, 1, 21))
        fig.add_trace(go.Bar(x=(edges[:-1] + edges[1:]) / 2 * 100, y=counts, width=np.diff(edges) * 100,
                             marker_color="#b279a2", hovertemplate="%{x:.0f} %: %{y} ops<extra></extra>"))
    med = float(np.median(vals) * 100) if len(vals) else 0.0
    fig.update_layout(title={"text": f"Memcpy share of fused ops (median {med:.1f} %)", "font": {"size": 13}},
                      xaxis={"title": "% of op time in memcpy in/out"}, yaxis={"title": "ops"},
                      height=320, margin={"l": 60, "r": 20, "t": 40, "b": 40}, template="plotly_white")
    return fig
