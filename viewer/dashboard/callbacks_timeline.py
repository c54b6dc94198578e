"""Timeline callbacks: choose the window (zoom, reset, a step, a heatmap cell, a finding) and the ranks shown as
their threads, draw it aggregated, export it for Perfetto. The window is kept in ns on the run's axis (as the
analyses' windows); the axis shows ms since the run's first event."""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import orjson
from dash import Input, Output, State, callback_context, dcc, no_update
from dash.exceptions import PreventUpdate

from viewer.dashboard.fig_timeline import (
    add_critical_path,
    add_flows,
    add_launch_flows,
    add_reset_bands,
    timeline_figure,
)
from viewer.dashboard.outliers import timeline_ranks
from viewer.findings.rule import step_window
from viewer.kineto.merge import write_merged as write_kineto
from viewer.merge import plan_merge, write_merged

PIXELS = 1400
MAX_BARS = 8000


def window_from_relayout(relayout, origin_ns: int = 0):
    """(t0_ns, t1_ns) from a zoom (the axis in ms since ``origin_ns``), "reset" for an autorange, None when
    the x axis did not change."""
    if not relayout:
        return None
    if relayout.get("xaxis.autorange"):
        return "reset"
    lo, hi = relayout.get("xaxis.range[0]"), relayout.get("xaxis.range[1]")
    if lo is None and isinstance(relayout.get("xaxis.range"), list):
        lo, hi = relayout["xaxis.range"]
    if lo is None or hi is None:
        return None
    return origin_ns + int(float(lo) * 1e6), origin_ns + int(float(hi) * 1e6)


def window_trace(held, t0=None, t1=None, ranks=None) -> bytes:
    """The run as ``ringscope merge`` writes it (one Chrome trace on the run's axis), cut to ``ranks`` (default:
    all) and to the events that overlap [t0, t1] ns (default: the whole run)."""
    t0 = held.timeline.t_min if t0 is None else t0
    t1 = held.timeline.t_max if t1 is None else t1
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "window.json"
        if "kineto" in held.run.has:   # merged from the tables: cut them first
            ev = held.run.events
            keep = (ev["t_ns"] < t1) & (ev["t_ns"] + ev["dur_ns"] > t0) & (ev["rank"].isin(ranks) if ranks else True)
            write_kineto(dataclasses.replace(held.run.tables, events=ev[keep]), out)
            return out.read_bytes()
        plan = plan_merge(held.path)
        plan.ranks = [s for s in plan.ranks if not ranks or s.rank in ranks]
        write_merged(plan, out)
        head, _, *lines, _, _ = out.read_bytes().split(b"\n")   # one event a line, between [ and ]
    kept = []
    for line in lines:
        e = orjson.loads(line.rstrip(b","))
        ts, dur = e.get("ts"), e.get("dur", 0)
        if ts is None or ts * 1000 < t1 and (ts + dur) * 1000 >= t0:
            kept.append(line.rstrip(b","))
    return head + b'\n"traceEvents": [\n' + b",\n".join(kept) + b"\n]}\n"


def register(app, ctx):
    def held_of(run_id):
        held = ctx.registry.get(run_id) if run_id else None
        if held is None:
            raise PreventUpdate
        return held

    # One small callback per way of choosing the window. They must stay separate: Dash drops an
    # in-flight request of a callback when the same callback fires again, and the graph reports an
    # autosize relayout after every redraw, which would otherwise cancel a step or heatmap choice.
    # view is the one writer (no allow_duplicate) of the window, ranks, threads and step: Dash holds a callback
    # while a pending one has its inputs as plain outputs, so the graph and the URL wait for it (one draw). The
    # rank choices come with them: a dropdown drops a value its options lack, pinned ranks among them
    @app.callback(Output("tl-ranks", "options"), Output("tl-expand", "options"), Output("tl-window", "data"),
                  Output("tl-ranks", "value"), Output("tl-expand", "value"), Output("tl-step", "value"),
                  Input("run-a", "value"), Input("url-pending", "data"))
    def view(run_id, q):
        """A new run opens whole, one lane a rank: every rank, or past ``MANY_RANKS`` its outliers; a restored URL
        (callbacks_url) opens its window, else its step's, on its ranks (those the run has), else as a new run. The
        choice of ranks lists the outliers first."""
        held = held_of(run_id)
        order, opening = timeline_ranks(held.timeline.ranks, held.outliers)
        marked = set(held.outliers)
        options = [{"label": f"rank {r}" + (" · outlier" if r in marked else ""), "value": r} for r in order]
        if "url-pending.data" not in callback_context.triggered_prop_ids or not q:
            return options, options, None, opening, None, None
        ranks = [r for r in q["ranks"] or () if r in held.timeline.ranks] or opening
        new = "run-a.value" in callback_context.triggered_prop_ids
        step = q["step"]
        window = q["window"] or (step_window(held.run, step) if step is not None else None)
        return options, options, window, ranks, None if new else no_update, step

    @app.callback(Output("tl-expand", "value", allow_duplicate=True), Input("tl-graph", "clickData"),
                  State("tl-expand", "value"), prevent_initial_call=True)
    def toggle_rank(click, expanded):
        """A click on a rank's lane shows its threads; on one of its threads', its one lane again."""
        if not click or not click.get("points") or not str(click["points"][0].get("y", "")).startswith("r"):
            raise PreventUpdate
        rank = int(str(click["points"][0]["y"]).split()[0][1:])
        expanded = list(expanded or [])
        return [r for r in expanded if r != rank] if rank in expanded else expanded + [rank]

    @app.callback(Output("tl-window", "data", allow_duplicate=True), Input("tl-graph", "relayoutData"),
                  State("run-a", "value"), prevent_initial_call=True)
    def zoom(relayout, run_id):
        win = window_from_relayout(relayout, held_of(run_id).timeline.t_min)
        if win is None:
            raise PreventUpdate
        return None if win == "reset" else list(win)

    @app.callback(Output("tl-window", "data", allow_duplicate=True), Input("tl-reset", "n_clicks"),
                  prevent_initial_call=True)
    def reset(_clicks):
        return None

    @app.callback(Output("tl-window", "data", allow_duplicate=True), Input("tl-step", "value"),
                  State("run-a", "value"), State("tl-window", "data"), State("url-pending", "data"),
                  prevent_initial_call=True)
    def go_to_step(step, run_id, shown, restored):
        if restored and step == restored["step"] and restored["window"] and shown == restored["window"]:
            raise PreventUpdate   # a URL's step with its own window (a zoom into the step): that window stands
        win = step_window(held_of(run_id).run, int(step)) if step is not None else None
        if win is None or list(win) == shown:
            raise PreventUpdate   # shown already (view opened it): drawing it again would be a second draw
        return list(win)

    @app.callback(Output("tl-graph", "figure"), Input("tabs", "value"), Input("run-a", "value"),
                  Input("tl-window", "data"), Input("tl-ranks", "value"), Input("tl-expand", "value"),
                  Input("tl-critical", "value"))
    def draw(tab, run_id, window, ranks, expand, critical):
        if tab != "timeline":
            raise PreventUpdate
        return figure(held_of(run_id), window, ranks, expand, critical)

    @app.callback(Output("tl-download", "data"), Input("tl-perfetto", "n_clicks"), State("run-a", "value"),
                  State("tl-window", "data"), State("tl-ranks", "value"), prevent_initial_call=True)
    def open_in_perfetto(_clicks, run_id, window, ranks):
        held = held_of(run_id)
        data = window_trace(held, *(window or (None, None)), ranks=ranks or None)
        return dcc.send_bytes(data, f"{held.label}-window.json")


def figure(held, window=None, ranks=None, expand=None, critical=None):
    """The timeline of ``held`` over ``window`` (ns) and ``ranks``, those in ``expand`` as their threads (and with
    the critical path, the late rank's: where its time went)."""
    run = held.run
    t0, t1 = window if window else (None, None)
    late = run.headline()["late_rank"]
    expand = [*(expand or ()), *([late] if critical and late is not None else [])]
    win = held.timeline.window(t0, t1, ranks=ranks or None, expand=expand, px=PIXELS, max_bars=MAX_BARS)
    fig = timeline_figure(win, title=held.label + ":", steps=run.step_times(), late_rank=late)
    if win.expanded and run.why_not("fusion_ops") is None:
        add_flows(fig, run.tensor_ops, run.fused_ops, win)
    if win.expanded and "kineto" in run.has:
        add_launch_flows(fig, run.events, win)
    if run.why_not("recoveries") is None:
        add_reset_bands(fig, run.recoveries(), win)
    if critical and run.why_not("critical_path"):
        fig.layout.title.text += f" · no critical path: it {run.why_not('critical_path')}"
    elif critical:
        add_critical_path(fig, run.critical_path(), win)
    return fig
