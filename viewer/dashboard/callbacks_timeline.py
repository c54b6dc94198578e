"""Timeline callbacks: choose the window (zoom, reset, a step, a heatmap cell, a finding) and draw it aggregated.
The window is kept in ns on the run's axis (as the analyses' windows); the axis shows ms since the run's
first event."""
from __future__ import annotations

from dash import ALL, Input, Output, State
from dash import ctx as dash_ctx
from dash.exceptions import PreventUpdate

from viewer.dashboard.fig_timeline import add_critical_path, add_reset_bands, timeline_figure
from viewer.findings.rule import step_window

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


def register(app, ctx):
    def held_of(run_id):
        held = ctx.registry.get(run_id) if run_id else None
        if held is None:
            raise PreventUpdate
        return held

    @app.callback(Output("tl-ranks", "options"), Input("run-a", "value"))
    def rank_options(run_id):
        return [{"label": f"rank {r}", "value": r} for r in held_of(run_id).timeline.ranks]

    # One small callback per way of choosing the window. They must stay separate: Dash drops an
    # in-flight request of a callback when the same callback fires again, and the graph reports an
    # autosize relayout after every redraw, which would otherwise cancel a step or heatmap choice.
    @app.callback(Output("tl-window", "data"), Output("tl-ranks", "value"), Input("run-a", "value"))
    def new_run(_run_id):
        return None, None  # the whole run, every rank

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
                  State("run-a", "value"), prevent_initial_call=True)
    def go_to_step(step, run_id):
        win = step_window(held_of(run_id).run, int(step)) if step is not None else None
        if win is None:
            raise PreventUpdate
        return list(win)

    def opened(held, win, ranks):
        """The timeline's outputs that open ``win`` on ``ranks``."""
        # a Horovod timeline holds rank 0's lanes only: then keep every lane rather than show none
        return (list(win) if win else None), [r for r in ranks if r in held.timeline.ranks] or None, "timeline"

    opens = (Output("tl-window", "data", allow_duplicate=True), Output("tl-ranks", "value", allow_duplicate=True),
             Output("tabs", "value", allow_duplicate=True))

    @app.callback(*opens, Input("neg-heatmap", "clickData"), State("run-a", "value"), prevent_initial_call=True)
    def open_heatmap_cell(click, run_id):
        if not click or not click.get("points"):
            raise PreventUpdate
        held = held_of(run_id)
        rank, step = int(click["points"][0]["y"]), int(click["points"][0]["x"])
        return opened(held, step_window(held.run, step, [rank]), [rank])

    @app.callback(*opens, Input({"type": "evidence", "index": ALL}, "n_clicks"), State("run-a", "value"),
                  prevent_initial_call=True)
    def open_evidence(_clicks, run_id):
        """A finding's evidence: its window (else its first step's), its ranks selected."""
        held = held_of(run_id)
        if not dash_ctx.triggered or not dash_ctx.triggered[0]["value"]:
            raise PreventUpdate   # the buttons were drawn, not clicked
        ev = held.run.findings()["evidence"].iloc[dash_ctx.triggered_id["index"]]
        win = ev["window_ns"] or (step_window(held.run, ev["steps"][0], ev["ranks"] or None) if ev["steps"] else None)
        return opened(held, win, ev["ranks"])

    @app.callback(Output("tl-graph", "figure"), Input("tabs", "value"), Input("run-a", "value"),
                  Input("tl-window", "data"), Input("tl-ranks", "value"), Input("tl-critical", "value"))
    def draw(tab, run_id, window, ranks, critical):
        if tab != "timeline":
            raise PreventUpdate
        held = held_of(run_id)
        run = held.run
        t0, t1 = window if window else (None, None)
        win = held.timeline.window(t0, t1, ranks=ranks or None, px=PIXELS, max_bars=MAX_BARS)
        fig = timeline_figure(win, title=held.label + ":")
        if run.why_not("recoveries") is None:
            add_reset_bands(fig, run.recoveries(), win)
        if critical and run.why_not("critical_path"):
            fig.layout.title.text += f" · no critical path: it {run.why_not('critical_path')}"
        elif critical:
            add_critical_path(fig, run.critical_path(), win)
        return fig
