"""Timeline figure: per-lane bars of an aggregated window (see timeline_agg)."""
from __future__ import annotations

import plotly.graph_objects as go

from viewer.dashboard.theme import PHASES


def timeline_figure(view, title: str = "") -> go.Figure:
    """Horizontal bars per phase over the window's lanes; x in ms since the run's first event."""
    fig = go.Figure()
    for phase, colour in PHASES.items():
        d = view.bars.get(phase)
        if d is None or not len(d["base"]):
            continue
        fig.add_trace(go.Bar(
            name=phase, orientation="h", y=d["y"], base=d["base"], x=d["width"],
            marker={"color": colour, "opacity": d["opacity"], "line": {"width": 0}},
            hovertext=d["text"], hoverinfo="text", width=0.8))
    lanes = list(view.lanes)
    merged = f" · {view.n_merged_bars:,} merged bars" if view.n_merged_bars else ""
    fig.update_layout(
        title={"text": f"{title} {view.n_events:,} spans in window · {view.n_exact:,} drawn exactly{merged}",
               "font": {"size": 13}},
        barmode="overlay", bargap=0.15, showlegend=True, uirevision="timeline",
        height=max(260, 28 * len(lanes) + 120), margin={"l": 130, "r": 20, "t": 40, "b": 40},
        xaxis={"title": "ms since the run's first event",
               "range": [(view.t0_ns - view.origin_ns) / 1e6, (view.t1_ns - view.origin_ns) / 1e6]},
        yaxis={"categoryorder": "array", "categoryarray": lanes[::-1], "type": "category",
               "fixedrange": True},
        legend={"orientation": "h", "y": -0.15 if len(lanes) > 6 else -0.3},
        template="plotly_white")
    if not lanes:
        fig.add_annotation(text="no spans in this run", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
    add_host_groups(fig, lanes, view.hosts)
    return fig


def host_runs(hosts: list) -> list[tuple[str, int, int]]:
    """(host, first, last) index of each run of consecutive equal hosts; none unless two or more hosts."""
    known = [h for h in hosts if h]
    if len(set(known)) < 2:
        return []
    runs: list[tuple[str, int, int]] = []
    for i, h in enumerate(hosts):
        if runs and runs[-1][0] == h:
            runs[-1] = (h, runs[-1][1], i)
        else:
            runs.append((h, i, i))
    return [(h or "host unknown", a, b) for h, a, b in runs]


def add_host_groups(fig: go.Figure, lanes: list, hosts: list) -> None:
    """Shade every other host's lanes, rule a line between hosts and name each host at its top lane
    (lane i sits at category position len - 1 - i: the axis lists the lanes bottom up)."""
    n = len(lanes)
    for k, (host, a, b) in enumerate(host_runs(hosts)):
        top, bottom = n - 1 - a + 0.5, n - 1 - b - 0.5
        if k % 2:
            fig.add_shape(type="rect", xref="paper", yref="y", x0=0, x1=1, y0=bottom, y1=top, layer="below",
                          line={"width": 0}, fillcolor="rgba(76,120,168,0.07)", name=f"host-band-{host}")
        if k:
            fig.add_shape(type="line", xref="paper", yref="y", x0=0, x1=1, y0=top, y1=top,
                          line={"color": "#555", "width": 1.5, "dash": "dot"}, name=f"host-rule-{host}")
        fig.add_annotation(text=f"<b>host {host}</b>", xref="paper", yref="y", x=1.0, y=top, xanchor="right",
                           yanchor="top", showarrow=False, font={"size": 12, "color": "#222"},
                           bgcolor="rgba(255,255,255,0.9)", bordercolor="#555", borderwidth=1, borderpad=2,
                           name=f"host-label-{host}")
