"""Communication page figure: busbw against message size (``run.op_bandwidth()``), the credible α-β fits
(``run.alpha_beta()``) drawn as lines, and the peak."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viewer import units

MAX_POINTS = 3000
_COLOURS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#b279a2"]


def busbw_figure(bw, fits, peak_gbps=None, peak_given: bool = False) -> go.Figure:
    """Per-op busbw (a sample of at most MAX_POINTS per backend and op), the median per size, and the
    line of each fit in ``fits`` (rows of ``alpha_beta`` that mean something)."""
    fig = go.Figure()
    bw = bw[bw["bytes"] > 0]
    fit = {(f.backend, f.op): f for f in fits.itertuples(index=False)}
    for i, ((backend, op), d) in enumerate(bw.groupby(["backend", "op"])):
        name, colour = f"{backend} {op}", _COLOURS[i % len(_COLOURS)]
        pts = d.sample(MAX_POINTS, random_state=0) if len(d) > MAX_POINTS else d
        fig.add_trace(go.Scattergl(
            x=pts["bytes"], y=pts["busbw_gbps"], mode="markers", name=f"{name} ops",
            marker={"color": colour, "size": 5, "opacity": 0.35}, hoverinfo="text",
            text=[f"{name}: {units.size(b)} · {units.rate(r)}" for b, r in zip(pts["bytes"], pts["busbw_gbps"])]))
        med = d.groupby("bytes")["busbw_gbps"].median()
        fig.add_trace(go.Scatter(x=med.index, y=med.values, mode="lines+markers", name=f"{name} median",
                                 line={"color": colour}))
        if (backend, op) in fit:
            f = fit[(backend, op)]
            x = np.geomspace(max(float(d["bytes"].min()), 1.0), float(d["bytes"].max()) * 2, 60)
            y = float(d["factor"].median()) * x / (f.alpha_us * 1e3 + x / f.beta_gbps)
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line={"color": colour, "dash": "dot"},
                                     name=f"{name} fit: α {units.fmt(f.alpha_us, 'us')}, β {units.rate(f.beta_gbps)}"))
    if peak_gbps:
        fig.add_hline(y=peak_gbps, line_dash="dash", line_color="#e45756",
                      annotation_text=f"{'given peak' if peak_given else 'best observed'} {units.rate(peak_gbps)}")
    fig.update_layout(title={"text": "Bus bandwidth against message size (nccl-tests factors)", "font": {"size": 13}},
                      xaxis={"title": "message size (bytes)", "type": "log"},
                      yaxis={"title": "busbw (GB/s)", "rangemode": "tozero"},
                      height=420, margin={"l": 60, "r": 20, "t": 40, "b": 40}, template="plotly_white",
                      legend={"orientation": "h", "y": -0.2})
    return fig
