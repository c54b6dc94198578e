"""Compare page figures: two runs side by side."""
from __future__ import annotations

import plotly.graph_objects as go

A_COLOUR, B_COLOUR = "#4c78a8", "#f58518"


def _empty(fig, text):
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")


def straggler_compare(last_a, last_b, label_a: str, label_b: str) -> go.Figure:
    """Share of negotiations each rank was last in, run A next to run B."""
    fig = go.Figure()
    for last, label, colour in ((last_a, label_a, A_COLOUR), (last_b, label_b, B_COLOUR)):
        if last is not None and len(last):
            fig.add_trace(go.Bar(x=[f"rank {int(r)}" for r in last["rank"]], y=last["share_last"] * 100,
                                 name=label, marker_color=colour))
    if not fig.data:
        _empty(fig, "no readiness data")
    fig.update_layout(title={"text": "Stragglers: % of negotiations each rank was last", "font": {"size": 13}},
                      barmode="group", yaxis={"title": "%"}, height=320, template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 40, "b": 40})
    return fig


def fusion_compare(fus_a, fus_b, label_a: str, label_b: str) -> go.Figure:
    """Tensors per fused op, both runs overlaid (as shares so runs of different length compare)."""
    fig = go.Figure()
    for fus, label, colour in ((fus_a, label_a, A_COLOUR), (fus_b, label_b, B_COLOUR)):
        if fus is not None and len(fus):
            share = fus["count"].value_counts(normalize=True).sort_index() * 100
            fig.add_trace(go.Bar(x=share.index, y=share.values, name=label, marker_color=colour))
    if not fig.data:
        _empty(fig, "no fused ops")
    fig.update_layout(title={"text": "Fusion: tensors per fused op", "font": {"size": 13}}, barmode="group",
                      xaxis={"title": "tensors fused"}, yaxis={"title": "% of ops"}, height=320,
                      template="plotly_white", margin={"l": 60, "r": 20, "t": 40, "b": 40})
    return fig


def bandwidth_compare(comm_a, comm_b, label_a: str, label_b: str) -> go.Figure:
    """Median busbw per message size of each run's main op (the one moving the most bytes)."""
    fig = go.Figure()
    for comm, label, colour in ((comm_a, label_a, A_COLOUR), (comm_b, label_b, B_COLOUR)):
        if comm is not None and len(comm):
            op = comm.groupby("op")["bytes"].sum().idxmax()
            label = f"{label} ({op})"
            med = comm[comm["op"] == op].groupby("bytes")["busbw"].median()
            fig.add_trace(go.Scatter(x=med.index, y=med.values, mode="lines+markers", name=label,
                                     line={"color": colour}))
    if not fig.data:
        _empty(fig, "no multi-rank communication")
    fig.update_layout(title={"text": "Bandwidth: median busbw by message size", "font": {"size": 13}},
                      xaxis={"title": "bytes", "type": "log"}, yaxis={"title": "GB/s", "rangemode": "tozero"},
                      height=320, template="plotly_white", margin={"l": 60, "r": 20, "t": 40, "b": 40})
    return fig
