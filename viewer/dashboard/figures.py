"""The pages' figures (all but the timeline's), each drawn from one analysis of a ``viewer.Run``."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from viewer import units, vocab
from viewer.dashboard.outliers import MANY_RANKS, METRICS, TOP

MAX_STEP_POINTS = 20_000   # the Overview's step times, over all ranks
MAX_OPS_SHOWN = 3000       # busbw points per backend and op
MAX_STEP_COLUMNS = 600     # the rank x step heatmap's
MAX_HEATMAP_PX = 760       # its height: past ~20 ranks the rows grow thinner
MARGIN = {"l": 60, "r": 20, "t": 40, "b": 40}
# one colour per meaning, each with a label beside it (a legend entry, an annotation or an axis title)
COLOURS = ["#4c78a8", "#9d755d", "#54a24b", "#b279a2", "#72b7b2"]   # series; run A and run B take the first two
LATE = "#e69f00"        # a rank behind the others (never red: red is exposed communication, viewer/vocab.py)
SHAPES = ("", "/")      # run A's bars plain, run B's hatched
REFERENCE = "#666666"   # a threshold or a peak: a dashed line named by its annotation
WHATIF_COLOURS = {"compute": "#4c78a8", "wait": "#e45756", "comm": "#54a24b", "phase": "#b279a2"}
# transparent backgrounds: the page's light or dark colours show through (assets/style.css themes the text)
TEMPLATE = go.layout.Template(pio.templates["plotly_white"])
TEMPLATE.layout.update(paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)")


def _styled(fig: go.Figure, title: str, height: int = 320, **layout) -> go.Figure:
    return fig.update_layout(title={"text": title, "font": {"size": 13}}, height=height, template=TEMPLATE,
                             **{"margin": MARGIN, **layout})


def step_time_figure(st, late=None, outliers=()) -> go.Figure:
    """Duration of every step on every rank (``run.step_times()``, in ms) on an axis fitted to them; the
    ``late`` rank drawn thicker and named so. Past ``MANY_RANKS`` ranks: the ranks' spread per step (median,
    10-90 %, slowest) and the ``outliers``' own lines."""
    if st["rank"].nunique() > MANY_RANKS:
        return _step_spread(st, late, outliers)
    fig = go.Figure()
    per_rank = max(50, MAX_STEP_POINTS // st["rank"].nunique())
    for rank, d in st.groupby("rank"):
        if len(d) > per_rank:
            d = d.iloc[:: -(-len(d) // per_rank)]
        is_late = late is not None and int(rank) == late
        fig.add_trace(go.Scatter(x=d["step"], y=d["dur_ns"] / 1e6, mode="lines+markers",
                                 name=f"rank {int(rank)}" + (" (late)" if is_late else ""),
                                 line={"width": 4 if is_late else 1.5}, marker={"size": 8 if is_late else 4,
                                                                                "symbol": "diamond" if is_late
                                                                                else "circle"}))
    return _styled(fig, "Step time per rank", 280, yaxis={"title": "ms"},
                   xaxis={"title": "step", "tickformat": "d", "dtick": max(1, -(-st["step"].nunique() // 12))})


def _step_spread(st, late, outliers) -> go.Figure:
    st = st[st["step"] >= 0]
    ms = st["dur_ns"].astype("float64") / 1e6
    q = ms.groupby(st["step"]).quantile([0.1, 0.5, 0.9]).unstack()
    top = ms.groupby(st["step"]).max()
    x = q.index.to_numpy()
    fig = go.Figure([
        go.Scatter(x=x, y=q[0.9], mode="lines", line={"width": 0}, hoverinfo="skip", showlegend=False),
        go.Scatter(x=x, y=q[0.1], mode="lines", line={"width": 0}, fill="tonexty", fillcolor="rgba(76,120,168,0.25)",
                   name="10-90 % of ranks", hovertemplate="step %{x}: 10 % of ranks under %{y:.2f} ms<extra></extra>"),
        go.Scatter(x=x, y=q[0.5], mode="lines", line={"color": COLOURS[0], "width": 2}, name="median rank",
                   hovertemplate="step %{x}: median %{y:.2f} ms<extra></extra>"),
        go.Scatter(x=x, y=top, mode="lines", line={"color": REFERENCE, "width": 1, "dash": "dot"},
                   name="slowest rank", hovertemplate="step %{x}: slowest %{y:.2f} ms<extra></extra>")])
    for r in list(dict.fromkeys([*([late] if late is not None else []), *outliers]))[:TOP]:
        d = st[st["rank"] == r]
        fig.add_trace(go.Scatter(x=d["step"], y=d["dur_ns"] / 1e6, mode="lines+markers",
                                 name=f"rank {int(r)}" + (" (late)" if r == late else ""),
                                 line={"width": 3 if r == late else 1.5, "color": LATE if r == late else None},
                                 marker={"size": 6, "symbol": "diamond" if r == late else "circle"}))
    return _styled(fig, f"Step time: the spread of {st['rank'].nunique():,} ranks and the outliers", 280,
                   yaxis={"title": "ms"}, xaxis={"title": "step", "tickformat": "d"})


def breakdown_bars(by_rank, of: int | None = None) -> go.Figure:
    """One stacked bar per rank, a segment per phase of ``viewer/vocab.py`` (mean per step); a rank without
    phase spans shows its compute as "phases unknown" (never split by guess). ``of``: the run's ranks, when
    ``by_rank`` holds only its outliers."""
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
    title = "Where the step went, mean per step (adds up to the step)"
    title += f": the {len(d)} outliers of {of:,} ranks" if of else ""
    return _styled(fig, title, 340, barmode="stack",
                   yaxis={"title": "ms per step"}, legend={"orientation": "h", "y": -0.15, "traceorder": "normal"})


def _bar(name: str, ranks: list, ns, colour: str, **marker) -> go.Bar:
    return go.Bar(name=name, x=ranks, y=(ns / 1e6).tolist(), marker_color=colour, customdata=[units.duration(v)
                  for v in ns], hovertemplate="%{x}: %{customdata}<extra>" + name + "</extra>", **marker)


def rank_step_heatmap(matrix, hosts: dict | None = None, step=None, marked=(),
                      metric: str = "lateness") -> go.Figure:
    """Ranks by steps of one of ``outliers.METRICS`` (``outliers.matrices``: ns, drawn in ms), for lateness
    ``run.lateness()``. Past MAX_STEP_COLUMNS steps a column is the mean of a bin, named by its first step; past
    ``outliers.MANY_RANKS`` ranks the rows are thin and the axis names some. With two or more ``hosts``
    (``{rank: host}``) each row names its host and a rule separates hosts. The cells of ``step`` on the ranks
    ``marked`` (a finding's evidence) are outlined."""
    label, meaning, bar_title = METRICS[metric]
    fig = go.Figure()
    steps = np.asarray(matrix.columns)
    z = matrix.to_numpy(dtype=float) / 1e6
    if len(steps) > MAX_STEP_COLUMNS:
        k = -(-len(steps) // MAX_STEP_COLUMNS)
        pad = (-len(steps)) % k
        z = np.nanmean(np.pad(z, ((0, 0), (0, pad)), constant_values=np.nan).reshape(len(z), -1, k), axis=2)
        steps = steps[::k]
    ranks = [int(r) for r in matrix.index]
    many = len(ranks) > MANY_RANKS
    hosts = hosts if hosts and len(set(hosts.values())) > 1 else {}
    on = [hosts.get(r) or "?" for r in ranks]
    fig.add_trace(go.Heatmap(
        z=z, x=steps, y=ranks, colorscale="YlOrBr", colorbar={"title": bar_title},
        customdata=[[h] * z.shape[1] for h in on] if hosts else None,
        hovertemplate="rank %{y}" + (" on %{customdata}" if hosts else "")
        + f" · step %{{x}}<br>%{{z:.3f}} ms {meaning}<extra></extra>",
        xgap=0, ygap=0 if many else 1))
    for (a, ha), (b, hb) in zip(zip(ranks, on), zip(ranks[1:], on[1:])):
        if hosts and ha != hb and not many:
            fig.add_shape(type="line", xref="paper", yref="y", x0=0, x1=1, y0=(a + b) / 2, y1=(a + b) / 2,
                          line={"color": "#222", "width": 2}, name=f"host-rule-{hb}")
    col = int(np.searchsorted(steps, step, side="right")) - 1 if step is not None and len(steps) else -1
    edges = np.r_[steps, steps[-1] + (steps[-1] - steps[-2] if len(steps) > 1 else 1)] if col >= 0 else ()
    for r in (r for r in marked if r in ranks and col >= 0):
        y = r if len(ranks) >= 2 else 0   # one rank: a category axis, its row at 0
        fig.add_shape(type="rect", xref="x", yref="y", x0=edges[col] - 0.5, x1=edges[col + 1] - 0.5, y0=y - 0.5,
                      y1=y + 0.5, line={"color": LATE, "width": 3}, name=f"evidence-{edges[col]}-{r}")
    title = ("Lateness behind the first ready rank" if metric == "lateness" else f"{label.capitalize()} per step")
    ticks = {} if many else {"tickmode": "array", "tickvals": ranks,
                             "ticktext": [f"{r} ({h})" if hosts else str(r) for r, h in zip(ranks, on)], "dtick": 1}
    return _styled(
        fig, f"{title} (click a cell to open it on the timeline)",
        min(MAX_HEATMAP_PX, max(260, 30 * len(ranks) + 140)),
        margin={"l": 80 if hosts else 60, "r": 20, "t": 40, "b": 50},
        xaxis={"title": "step (Horovod timelines: n-th negotiation)" if metric == "lateness" else "step"},
        yaxis={"title": "rank (host)" if hosts and not many else "rank", "autorange": "reversed",
               "type": "category" if len(ranks) < 2 else "linear", **ticks})


def times_last_bar(last, hosts: dict | None = None) -> go.Figure:
    """Per rank (``run.stragglers()``): share of negotiations it was last in, and the wait it imposed."""
    hosts = hosts if hosts and len(set(hosts.values())) > 1 else {}
    last = last.sort_values("rank")
    fig = go.Figure(go.Bar(
        x=[f"rank {int(r)}" + (f" ({hosts.get(int(r), '?')})" if hosts else "") for r in last["rank"]],
        y=last["pct_last"], marker_color=LATE,
        customdata=np.c_[last["times_last"], [units.pct(p) for p in last["pct_last"]],
                         [units.duration(w) for w in last["wait_imposed_ns"]]],
        hovertemplate="%{x}: last in %{customdata[0]} negotiations (%{customdata[1]})<br>"
                      "imposed %{customdata[2]} of waiting on the others<extra></extra>"))
    return _styled(fig, "How often each rank was the last one ready", 300,
                   yaxis={"title": "% of negotiations", "rangemode": "tozero"})


def _histogram(values, edges, scale: float, colour: str, what: str) -> go.Bar:
    counts, edges = np.histogram(values, bins=edges)
    return go.Bar(x=(edges[:-1] + edges[1:]) / 2 * scale, y=counts, width=np.diff(edges) * scale,
                  marker_color=colour, name="fused ops", hovertemplate=what + ": %{y} ops<extra></extra>")


def fill_histogram(ops, threshold) -> go.Figure:
    """Fused ops (``pages.allreduces``) by fill ratio (bytes / fusion threshold); the threshold at 1.0."""
    vals = np.clip(ops["fill_ratio"].dropna().to_numpy(float), 0, 1.2)
    fig = go.Figure(_histogram(vals, np.linspace(0, 1.2, 25), 1.0, "#72b7b2", "fill %{x:.2f}"))
    fig.add_vline(x=1.0, line_dash="dash", line_color=REFERENCE, annotation_text=f"threshold {units.size(threshold)}")
    return _styled(fig, "Fill ratio of fused ops (bytes / fusion threshold)", xaxis={"title": "fill ratio"},
                   yaxis={"title": "ops"}, bargap=0.05)


def count_histogram(ops, threshold) -> go.Figure:
    values, n = np.unique(ops["count"].to_numpy(int), return_counts=True)
    fig = go.Figure(go.Bar(x=values, y=n, marker_color="#4c78a8",
                           hovertemplate="%{x} tensors: %{y} ops<extra></extra>"))
    title = "Tensors per fused op" + (f" (threshold {units.size(threshold)})" if threshold == threshold else "")
    return _styled(fig, title, xaxis={"title": "tensors fused"}, yaxis={"title": "ops"})


def memcpy_share_histogram(ops) -> go.Figure:
    vals = np.clip(ops["memcpy_share"].dropna().to_numpy(float), 0, 1)
    fig = go.Figure(_histogram(vals, np.linspace(0, 1, 21), 100.0, "#b279a2", "%{x:.0f} %"))
    return _styled(fig, "Memcpy share of each fused op", xaxis={"title": "% of op time in memcpy in/out"},
                   yaxis={"title": "ops"})


def busbw_figure(bw, fits, peak_gbps=None, peak_given: bool = False) -> go.Figure:
    """Per-op busbw (``run.op_bandwidth()``, at most MAX_OPS_SHOWN per backend and op), the median per size,
    each credible α-β fit of ``fits`` as a line, and the peak."""
    fig = go.Figure()
    bw = bw[bw["bytes"] > 0]
    fit = {(f.backend, f.op): f for f in fits.itertuples(index=False)}
    for i, ((backend, op), d) in enumerate(bw.groupby(["backend", "op"])):
        name, colour = f"{backend} {op}", COLOURS[i % len(COLOURS)]
        pts = d.sample(MAX_OPS_SHOWN, random_state=0) if len(d) > MAX_OPS_SHOWN else d
        fig.add_trace(go.Scatter(
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
            # n½, where the fit reaches half its bandwidth: smaller messages are latency-bound (a finding's evidence)
            fig.add_trace(go.Scatter(x=[f.half_bw_bytes], y=[float(d["factor"].median()) * f.beta_gbps / 2],
                                     mode="markers+text", text=[f"n½ {units.size(f.half_bw_bytes)}"],
                                     textposition="top center", name=f"{name} n½",
                                     marker={"color": colour, "size": 12, "symbol": "diamond"}))
    if peak_gbps:
        fig.add_hline(y=peak_gbps, line_dash="dash", line_color=REFERENCE,
                      annotation_text=f"{'given peak' if peak_given else 'best observed'} {units.rate(peak_gbps)}")
    return _styled(fig, "Bus bandwidth against message size (nccl-tests factors)", 420,
                   xaxis={"title": "message size (bytes)", "type": "log"},
                   yaxis={"title": "busbw (GB/s)", "rangemode": "tozero"}, legend={"orientation": "h", "y": -0.2})


# Compare: ``runs`` is [(label, rows)] for run A and run B, rows None where a run cannot have the analysis.
def straggler_compare(runs) -> go.Figure:
    fig = go.Figure([go.Bar(x=[f"rank {int(r)}" for r in d["rank"]], y=d["pct_last"], name=label, marker_color=c,
                            marker_pattern_shape=shape) for (label, d), c, shape in zip(runs, COLOURS, SHAPES)
                     if d is not None])
    return _styled(fig, "Stragglers: % of negotiations each rank was last", barmode="group", yaxis={"title": "%"})


def fusion_compare(runs) -> go.Figure:
    """Tensors per fused allreduce, as shares so that runs of different length compare."""
    fig = go.Figure()
    for (label, ops), c, shape in zip(runs, COLOURS, SHAPES):
        if ops is not None:
            share = ops["count"].value_counts(normalize=True).sort_index() * 100
            fig.add_trace(go.Bar(x=share.index, y=share.values, name=label, marker_color=c,
                                 marker_pattern_shape=shape))
    return _styled(fig, "Fusion: tensors per fused allreduce", barmode="group", xaxis={"title": "tensors fused"},
                   yaxis={"title": "% of ops"})


def bandwidth_compare(runs) -> go.Figure:
    """Median busbw per message size of each run's op that moved the most bytes."""
    fig = go.Figure()
    for (label, bw), c, dash in zip(runs, COLOURS, ("solid", "dash")):
        if bw is not None and len(bw):
            op = bw.groupby("op")["bytes"].sum().idxmax()
            med = bw[bw["op"] == op].groupby("bytes")["busbw_gbps"].median()
            fig.add_trace(go.Scatter(x=med.index, y=med.values, mode="lines+markers", name=f"{label} ({op})",
                                     line={"color": c, "dash": dash}))
    return _styled(fig, "Bandwidth: median busbw by message size", xaxis={"title": "bytes", "type": "log"},
                   yaxis={"title": "GB/s", "rangemode": "tozero"})


def whatif_steps(rows) -> go.Figure:
    fig = go.Figure()
    x = [r["step"] for r in rows]
    for key, name, dash in (("measured_ms", "measured", "solid"), ("baseline_ms", "replayed (run's settings)", "dot"),
                            ("predicted_ms", "predicted", "solid")):
        fig.add_trace(go.Scatter(x=x, y=[r[key] for r in rows], mode="lines+markers", name=name,
                                 line={"dash": dash}))
    return _styled(fig, "Step time: measured, replayed and predicted", 300,
                   yaxis={"title": "ms", "rangemode": "tozero"},
                   xaxis={"title": "step", "tickformat": "d", "dtick": max(1, -(-len(x) // 12))})


def whatif_timeline(tl) -> go.Figure:
    """One step predicted beside measured: a bar per compute/wait/phase span on its rank's row and per
    collective on the rank's comm row."""
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("predicted", "measured"))
    seen = set()
    for col, source in ((1, "predicted"), (2, "measured")):
        d = tl[tl["source"] == source]
        for kind, g in d.groupby(d["lane"].where(d["lane"] != "framework", d["name"])):
            ylab = [f"rank {r} {lane if lane in ('comm', 'phase') else ''}".strip()
                    for r, lane in zip(g["rank"], g["lane"])]
            fig.add_trace(go.Bar(x=(g["end_ms"] - g["start_ms"]).tolist(), base=g["start_ms"].tolist(), y=ylab,
                                 orientation="h", name=kind, legendgroup=kind, showlegend=kind not in seen,
                                 marker={"color": WHATIF_COLOURS.get(kind, "#888")}, textposition="none",
                                 hoverinfo="text", text=[f"{n}: {units.fmt(a, 'ms')} + {units.fmt(b - a, 'ms')}"
                                                         for n, a, b in zip(g["name"], g["start_ms"], g["end_ms"])]),
                          row=1, col=col)
            seen.add(kind)
    fig.update_yaxes(autorange="reversed")
    return _styled(fig, "One step, predicted beside measured (ms since the step began)",
                   120 + 40 * tl["rank"].nunique() * 2, barmode="overlay", margin={"l": 90, "r": 20, "t": 60, "b": 40})
