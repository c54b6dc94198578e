"""Breakdown figure: where each rank's step went (``run.breakdown()``), as stacked bars of the phases of
``viewer/vocab.py`` (mean per step)."""
from __future__ import annotations

import plotly.graph_objects as go

from viewer import units, vocab


def breakdown_bars(by_rank) -> go.Figure:
    """One stacked bar per rank, a segment per phase; a rank without phase spans shows its compute as
    "phases unknown" (never split by guess)."""
    fig = go.Figure()
    d = by_rank[by_rank["other_ns"].notna()]
    ranks = [f"rank {int(r)}" for r in d["rank"]]
    known = d["phases_known"].to_numpy(dtype=bool)
    for p in vocab.PHASES:
        ns = d[p.bucket].astype("float64").fillna(0.0)
        if p.span is None:   # what no phase covered; on a rank without phases: all its compute
            fig.add_trace(_bar("phases unknown", ranks, ns.where(~known, 0.0), "#c7c7c7", marker_pattern_shape="/"))
            ns = ns.where(known, 0.0)
        fig.add_trace(_bar(p.label, ranks, ns, p.colour))
    fig.update_layout(title={"text": "Where the step went, mean per step (adds up to the step)", "font": {"size": 13}},
                      barmode="stack", yaxis={"title": "ms per step"}, height=340, template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 40, "b": 40},
                      legend={"orientation": "h", "y": -0.15, "traceorder": "normal"})
    return fig


def _bar(name: str, ranks: list, ns, colour: str, **marker) -> go.Bar:
    return go.Bar(name=name, x=ranks, y=(ns / 1e6).tolist(), marker_color=colour, customdata=[units.duration(v)
                  for v in ns], hovertemplate="%{x}: %{customdata}<extra>" + name + "</extra>", **marker)
