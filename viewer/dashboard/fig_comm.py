"""Communication page figure: busbw against message size with the alpha-beta fit and the peak."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viewer.dashboard.derive import bus_factor

MAX_POINTS = 3000
_COLOURS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#b279a2"]


def busbw_figure(comm, fits: dict, peak_gbps=None, peak_given: bool = False) -> go.Figure:
    """Per-op busbw (a sample of at most MAX_POINTS), the median per size, each backend's fit."""
    fig = go.Figure()
    if comm is None or comm.empty:
        fig.add_annotation(text="no multi-rank communication in this run", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
        return fig.update_layout(template="plotly_white", height=380)
    for i, ((backend, op), d) in enumerate(comm.groupby(["backend", "op"])):
        backend = f"{backend} {op}"
        colour = _COLOURS[i % len(_COLOURS)]
        pts = d.sample(MAX_POINTS, random_state=0) if len(d) > MAX_POINTS else d
        fig.add_trace(go.Scattergl(
            x=pts["bytes"], y=pts["busbw"], mode="markers", name=f"{backend} ops",
            marker={"color": colour, "size": 5, "opacity": 0.35},
            hovertemplate="%{x:,} B · %{y:.3f} GB/s<extra>" + str(backend) + "</extra>"))
        med = d.groupby("bytes")["busbw"].median()
        fig.add_trace(go.Scatter(x=med.index, y=med.values, mode="lines+markers", name=f"{backend} median",
                                 line={"color": colour}))
        if str(backend) in fits:
            alpha_us, beta = fits[str(backend)]
            x = np.geomspace(max(float(d["bytes"].min()), 1.0), float(d["bytes"].max()) * 2, 60)
            factor = bus_factor(op, int(d["size"].max()))
            y = factor * x / (alpha_us * 1e3 + x / beta) if beta else x * 0
            fig.add_trace(go.Scatter(
                x=x, y=y, mode="lines", line={"color": colour, "dash": "dot"},
                name=f"{backend} fit: \u03b1={alpha_us:.1f} \u00b5s, \u03b2={beta:.2f} GB/s"))
    if peak_gbps:
        label = "given peak" if peak_given else "best observed"
        fig.add_hline(y=peak_gbps, line_dash="dash", line_color="#e45756",
                      annotation_text=f"{label} {peak_gbps:.2f} GB/s")
    fig.update_layout(title={"text": "Bus bandwidth against message size (nccl-tests factors)",
                             "font": {"size": 13}},
                      xaxis={"title": "message size (bytes)", "type": "log"},
                      yaxis={"title": "busbw (GB/s)", "rangemode": "tozero"},
                      height=420, margin={"l": 60, "r": 20, "t": 40, "b": 40}, template="plotly_white",
                      legend={"orientation": "h", "y": -0.2})
    return fig
