"""Compare page figures: two runs side by side, each from its own analyses; ``runs`` is [(label, rows)] for
run A and run B, rows None where a run cannot have the analysis."""
from __future__ import annotations

import plotly.graph_objects as go

COLOURS = ("#4c78a8", "#f58518")
_LAYOUT = {"height": 320, "template": "plotly_white", "margin": {"l": 60, "r": 20, "t": 40, "b": 40}}


def straggler_compare(runs) -> go.Figure:
    """Share of negotiations each rank was last in (``stragglers``)."""
    fig = go.Figure([go.Bar(x=[f"rank {int(r)}" for r in d["rank"]], y=d["pct_last"], name=label, marker_color=c)
                     for (label, d), c in zip(runs, COLOURS) if d is not None])
    return fig.update_layout(title={"text": "Stragglers: % of negotiations each rank was last", "font": {"size": 13}},
                             barmode="group", yaxis={"title": "%"}, **_LAYOUT)


def fusion_compare(runs) -> go.Figure:
    """Tensors per fused allreduce (``fusion_ops``), as shares so runs of different length compare."""
    fig = go.Figure()
    for (label, ops), c in zip(runs, COLOURS):
        if ops is None:
            continue
        share = ops["count"].value_counts(normalize=True).sort_index() * 100
        fig.add_trace(go.Bar(x=share.index, y=share.values, name=label, marker_color=c))
    return fig.update_layout(title={"text": "Fusion: tensors per fused allreduce", "font": {"size": 13}},
                             barmode="group", xaxis={"title": "tensors fused"}, yaxis={"title": "% of ops"}, **_LAYOUT)


def bandwidth_compare(runs) -> go.Figure:
    """Median busbw per message size of each run's main op, the one moving the most bytes (``op_bandwidth``)."""
    fig = go.Figure()
    for (label, bw), c in zip(runs, COLOURS):
        if bw is None or not len(bw):
            continue
        op = bw.groupby("op")["bytes"].sum().idxmax()
        med = bw[bw["op"] == op].groupby("bytes")["busbw_gbps"].median()
        fig.add_trace(go.Scatter(x=med.index, y=med.values, mode="lines+markers", name=f"{label} ({op})",
                                 line={"color": c}))
    return fig.update_layout(title={"text": "Bandwidth: median busbw by message size", "font": {"size": 13}},
                             xaxis={"title": "bytes", "type": "log"}, yaxis={"title": "GB/s", "rangemode": "tozero"},
                             **_LAYOUT)
