"""The timeline figure: per-lane bars of an aggregated window (see timeline_agg), and what is drawn over it:
step labels, the late rank, hosts, an elastic run's resets (docs/ELASTIC.md), the critical path and flows."""
from __future__ import annotations

import functools
import itertools

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from viewer import units
from viewer.dashboard.timeline_agg import PHASES
from viewer.kineto.launches import LAUNCH_CATS

MAX_STEPS = 200   # critical paths drawn per window (the widest windows hold the most steps)
MAX_STEP_LABELS = 40
MAX_FLOWS = 400
PATH_COLOUR = "#111111"
RESET_COLOUR = "#d62728"
REDONE_COLOUR = "#ff9896"
LATE_COLOUR = "rgba(228,87,86,0.10)"
TEMPLATE = pio.templates["plotly_white"]


def timeline_figure(view, title: str = "", steps=None, late_rank=None) -> go.Figure:
    """Horizontal bars per phase over the window's lanes; x in ms since the run's first event; ``steps``
    (``Run.step_times()``) labels the axis at each step's start, ``late_rank`` (the headline's) is marked."""
    lanes = list(view.lanes)
    merged = (f" · {view.n_hidden:,} under others" if view.n_hidden else "") + \
        (f" · {view.n_merged_bars:,} merged bars" if view.n_merged_bars else "")
    late = [k for k, r in enumerate(view.ranks) if r == late_rank]
    shapes, notes = step_labels(steps, view) if steps is not None else ([], [])
    if late:   # the late rank's lanes: a band behind them (lane k sits at category position len - 1 - k)
        shapes.append({"type": "rect", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "layer": "below",
                       "y0": len(lanes) - 1.5 - late[-1], "y1": len(lanes) - 0.5 - late[0], "line": {"width": 0},
                       "fillcolor": LATE_COLOUR, "name": f"late-rank-{late_rank}"})
    if not lanes:
        notes.append({"text": "no spans in this run", "showarrow": False, "x": 0.5, "y": 0.5, "xref": "paper",
                      "yref": "paper"})
    # built unvalidated: plotly's checks of a few thousand bars cost seconds, and these are plain arrays
    fig = go.Figure(layout={
        "title": {"text": f"{title} {view.n_events:,} spans in window · {view.n_exact:,} drawn exactly{merged}",
                  "font": {"size": 13}},
        "barmode": "overlay", "bargap": 0.15, "showlegend": True, "uirevision": "timeline",
        "height": max(260, (28 if len(lanes) <= 24 else 16) * len(lanes) + 140),
        "margin": {"l": 150, "r": 20, "t": 60, "b": 40},
        "xaxis": {"title": {"text": "ms since the run's first event"},
                  "range": [(view.t0_ns - view.origin_ns) / 1e6, (view.t1_ns - view.origin_ns) / 1e6]},
        "yaxis": {"categoryorder": "array", "categoryarray": lanes[::-1], "type": "category", "fixedrange": True,
                  "tickmode": "array", "tickvals": lanes,
                  "ticktext": [f"<b>{lane} · late</b>" if late[:1] == [k] else lane for k, lane in enumerate(lanes)]},
        "legend": {"orientation": "h", "y": -0.15 if len(lanes) > 6 else -0.3},
        "template": TEMPLATE, "shapes": shapes, "annotations": notes,
    }, data=[{"type": "bar", "name": phase, "orientation": "h", "y": d["y"], "base": d["base"], "x": d["width"],
              "marker": {"color": PHASES[phase], "opacity": d["opacity"], "line": {"width": 0}},
              "hovertext": d["text"], "hoverinfo": "text", "width": 0.8} for phase, d in view.bars.items()],
        _validate=False)
    add_host_groups(fig, lanes, view.hosts)
    return fig


def step_labels(steps, view) -> tuple[list, list]:
    """(rules, labels): "step N" at the top of the plot where step N starts (its earliest start on the ranks
    shown), a dotted rule down from it; every k-th step when the window holds more than ``MAX_STEP_LABELS``."""
    st = steps[(steps["step"] >= 0) & steps["rank"].isin(set(view.ranks))]
    starts = st.groupby("step")["start_ns"].min()
    starts = starts[(starts >= view.t0_ns) & (starts <= view.t1_ns)]
    rules, labels = [], []
    for step, t in starts.iloc[::-(-len(starts) // MAX_STEP_LABELS) or 1].items():
        x = (t - view.origin_ns) / 1e6
        rules.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                      "layer": "below", "line": {"color": "#888", "width": 1, "dash": "dot"},
                      "name": f"step-rule-{step}"})
        labels.append({"text": f"step {step}", "xref": "x", "yref": "paper", "x": x, "y": 1, "xanchor": "left",
                       "yanchor": "bottom", "showarrow": False, "font": {"size": 11, "color": "#444"},
                       "name": f"step-label-{step}"})
    return rules, labels


def host_runs(hosts: list) -> list[tuple[str, int, int]]:
    """(host, first, last) index of each run of consecutive equal hosts; none unless two or more hosts."""
    if len({h for h in hosts if h}) < 2:
        return []
    runs, i = [], 0
    for h, group in itertools.groupby(hosts):
        n = len(list(group))
        runs.append((h or "host unknown", i, i + n - 1))
        i += n
    return runs


def add_host_groups(fig: go.Figure, lanes: list, hosts: list) -> None:
    """Shade every other host's lanes, rule a line between hosts, name each at its top lane."""
    # lane i sits at category position len - 1 - i: the axis lists the lanes bottom up
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


def path_lanes(path, win):
    """The lane of each critical-path row in ``win`` (a pre-submit row lies on its rank's framework thread),
    None where that lane is not shown."""
    return [win.lane_of(int(r), "framework" if k == "pre-submit" else str(t), 0 if k == "pre-submit" else int(d))
            for r, t, d, k in zip(path["rank"], path["thread"], path["depth"], path["kind"])]


def add_critical_path(fig: go.Figure, path, win) -> go.Figure:
    """The path of each step in the window ``win``, a segment per span on its lane if shown, joined in order;
    a star on the pre-submit phase that made the step's last rank late."""
    if not len(path):
        return fig
    origin = win.origin_ns
    p = path.assign(lane=path_lanes(path, win))
    span = p.groupby("step").agg(lo=("start_ns", "min"), hi=("end_ns", "max"))
    steps = span[(span["hi"] >= win.t0_ns) & (span["lo"] <= win.t1_ns)].index[:MAX_STEPS]
    p = p[p["step"].isin(steps) & p["lane"].notna()].sort_values(["step", "order"])
    xs, ys, text = [], [], []
    for _, g in p.groupby("step", sort=True):
        for r in g.itertuples(index=False):
            label = f"step {r.step} · rank {r.rank} · {r.kind}: {r.name} ({units.duration(r.dur_ns)})"
            xs += [(r.start_ns - origin) / 1e6, (r.end_ns - origin) / 1e6]
            ys += [r.lane, r.lane]
            text += [label, label]
        xs, ys, text = xs + [None], ys + [None], text + [None]   # a gap between steps
    if not xs:
        return fig
    fig.add_trace(go.Scatter(name="critical path", x=xs, y=ys, mode="lines+markers", hovertext=text,
                             hoverinfo="text", line={"color": PATH_COLOUR, "width": 4},
                             marker={"size": 7, "color": PATH_COLOUR}, connectgaps=False))
    slow = p[p["slowest"]]
    if len(slow):
        mid = (slow["start_ns"] + slow["end_ns"]) / 2 - origin
        fig.add_trace(go.Scatter(name="slowest phase", x=(mid / 1e6).tolist(),
                                 y=slow["lane"].tolist(), mode="markers", hoverinfo="text",
                                 hovertext=[f"step {s}: rank {r}'s {n}, furthest over the others'"
                                            for s, r, n in zip(slow["step"], slow["rank"], slow["name"])],
                                 marker={"symbol": "star", "size": 14, "color": "#ffbf00",
                                         "line": {"color": PATH_COLOUR, "width": 1}}))
    return fig


def reset_text(r) -> str:
    ms = functools.partial(units.fmt, unit="ms")
    return (f"<b>reset {r['reset']}: {r['kind']}</b> ({r['size_before']} → {r['size_after']} ranks)<br>{r['cause']}"
            f"<br>lost {ms(r['lost_ms'])}: detection {ms(r['detect_ms'])}, re-forming {ms(r['reform_ms'])}, "
            f"restoring {ms(r['restore_ms'])}, first step {ms(r['first_step_ms'])}"
            f"<br>work redone since the last commit (step {r['last_commit_step']}): {ms(r['redone_ms'])}"
            f"<br>{units.pct(r['share_pct'])} of the job")


def add_reset_bands(fig: go.Figure, rec, win) -> None:
    """Under the spans of every lane of ``win``: a band from each reset's failure to the end of the first step
    after, and a lighter one over the work redone before it."""
    if not len(rec) or not win.lanes:
        return
    bands: dict[str, list] = {"reset": [], "work redone": []}   # (from, to, hover) of each band
    for r in rec.to_dict("records"):
        end = r["first_step_end_ns"] if r["first_step_end_ns"] is not None else r["restored_ns"]
        bands["reset"].append((r["failed_ns"], end, reset_text(r)))
        if r["redone_ms"]:
            bands["work redone"].append((r["failed_ns"] - int(r["redone_ms"] * 1e6), r["failed_ns"], reset_text(r)))
    traces = []
    for (name, spans), colour in zip(bands.items(), (RESET_COLOUR, REDONE_COLOUR)):
        bars = [(lane, (a - win.origin_ns) / 1e6, (b - a) / 1e6, text) for a, b, text in spans
                if a is not None and b is not None and win.t0_ns < b and a < win.t1_ns for lane in win.lanes]
        if bars:
            y, base, width, texts = map(list, zip(*bars))
            traces.append(go.Bar(name=name, orientation="h", y=y, base=base, x=width, width=1.0,
                                 marker={"color": colour, "opacity": 0.22, "line": {"width": 0}},
                                 hovertext=texts, hoverinfo="text", meta="elastic"))
    fig.add_traces(traces)
    fig.data = fig.data[-len(traces):] + fig.data[:-len(traces)]   # under the spans


def add_flows(fig: go.Figure, ops, fused, win) -> None:
    """An arrow from each tensor's submission (its thread's lane) to the start of the fused response that ran
    it (the fusion thread's lane), on the ranks expanded in ``win``."""
    ops = ops[ops["rank"].isin(win.expanded)]
    f = ops.merge(fused[["rank", "response", "start_ns"]], on=["rank", "response"], suffixes=("", "_fused"))
    f = f[(f["start_ns_fused"] >= win.t0_ns) & (f["submit_ns"] <= win.t1_ns)]
    text = [f"{t}: submitted → response {r} ({units.duration(b - a)})"
            for t, r, a, b in zip(f["tensor"], f["response"], f["submit_ns"], f["start_ns_fused"])]
    ranks = f["rank"].tolist()
    _draw_flows(fig, "submission → fused response", win, f["submit_ns"], f["start_ns_fused"],
                [win.lane_of(r, "tensor", 0) for r in ranks], [win.lane_of(r, "fusion", 0) for r in ranks], text)


def add_launch_flows(fig: go.Figure, events, win) -> None:
    """An arrow from each CUDA launch call (its CPU thread's lane) to the start of the GPU work it launched (its
    stream's lane), on the ranks expanded in ``win``: torch.profiler's correlation ids (its ``ac2g`` flows),
    which the events keep as the GPU row's ``launch_ns``."""
    ev = events[events["rank"].isin(win.expanded)]
    gpu = ev[ev["launch_ns"].notna()]
    gpu = gpu[(gpu["t_ns"] >= win.t0_ns) & (gpu["launch_ns"] <= win.t1_ns)]
    if not len(gpu) or len(gpu) > MAX_FLOWS:   # too many: the note, without joining them
        _draw_flows(fig, "launch → GPU", win, gpu["launch_ns"], gpu["t_ns"], [], [], [])
        return
    calls = ev[ev["cat"].isin(LAUNCH_CATS)].drop_duplicates(["rank", "t_ns"])[["rank", "t_ns", "thread", "depth",
                                                                                "name"]]
    f = gpu[["rank", "thread", "depth", "name", "t_ns", "launch_ns"]].merge(
        calls, left_on=["rank", "launch_ns"], right_on=["rank", "t_ns"], suffixes=("", "_cpu"))
    text = [f"{c} → {units.duration(b - a)} → {n[:80]}" for c, n, a, b in
            zip(f["name_cpu"], f["name"], f["launch_ns"], f["t_ns"])]
    cols = [f[c].to_numpy(dtype=object) for c in ("rank", "thread_cpu", "depth_cpu", "thread", "depth")]
    _draw_flows(fig, "launch → GPU", win, f["launch_ns"], f["t_ns"],
                [win.lane_of(int(r), str(t), int(d)) for r, t, d in zip(*cols[:3])],
                [win.lane_of(int(r), str(t), int(d)) for r, t, d in zip(cols[0], *cols[3:])], text)


def _draw_flows(fig: go.Figure, name: str, win, t_from, t_to, lane_from: list, lane_to: list, text: list) -> None:
    """Arrows ``name`` from (``t_from``, ``lane_from``) to (``t_to``, ``lane_to``) (ns, lanes of ``win``); none while
    the window holds more than ``MAX_FLOWS`` (too dense to follow), which the title says: zoom in."""
    n = len(t_from)
    if n > MAX_FLOWS:
        fig.layout.title.text += f" · {n:,} {name} flows: zoom in to draw them"
        return
    keep = [k for k in range(n) if lane_from[k] is not None and lane_to[k] is not None]
    if not keep:
        return
    a = (np.asarray(t_from, dtype="float64")[keep] - win.origin_ns) / 1e6
    b = (np.asarray(t_to, dtype="float64")[keep] - win.origin_ns) / 1e6
    xs = np.column_stack([a, b, np.full(len(keep), np.nan)]).ravel().tolist()
    ys = [y for k in keep for y in (lane_from[k], lane_to[k], None)]
    hover = [h for k in keep for h in (text[k], text[k], None)]
    fig.add_trace(go.Scatter(name=name, x=[None if x != x else x for x in xs], y=ys, mode="lines+markers",
                             hovertext=hover, hoverinfo="text", line={"color": "rgba(60,60,60,0.45)", "width": 1},
                             marker={"symbol": ["circle", "arrow", "circle"] * len(keep), "angleref": "previous",
                                     "size": [4, 9, 0] * len(keep), "color": "rgba(60,60,60,0.7)"}, connectgaps=False))
