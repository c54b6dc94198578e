"""Timeline callbacks: choose the window (zoom, reset, heatmap click) and draw it aggregated."""
from __future__ import annotations

from dash import Input, Output, State
from dash.exceptions import PreventUpdate

from viewer.dashboard import derive
from viewer.dashboard.fig_critical import add_critical_path
from viewer.dashboard.fig_recoveries import add_reset_bands
from viewer.dashboard.fig_timeline import timeline_figure

PIXELS = 1400
MAX_BARS = 8000


def window_from_relayout(relayout):
    """(t0_ns, t1_ns) from a zoom, "reset" for an autorange, None when the x axis did not change."""
    if not relayout:
        return None
    if relayout.get("xaxis.autorange"):
        return "reset"
    lo, hi = relayout.get("xaxis.range[0]"), relayout.get("xaxis.range[1]")
    if lo is None and isinstance(relayout.get("xaxis.range"), list):
        lo, hi = relayout["xaxis.range"]
    if lo is None or hi is None:
        return None
    return int(float(lo) * 1e6), int(float(hi) * 1e6)


def register(app, ctx):
    @app.callback(Output("tl-ranks", "options"), Input("run-a", "value"))
    def rank_options(run_id):
        view = ctx.registry.get(run_id) if run_id else None
        if view is None:
            raise PreventUpdate
        return [{"label": f"rank {r}", "value": r} for r in view.timeline.ranks]

    # One small callback per way of choosing the window. They must stay separate: Dash drops an
    # in-flight request of a callback when the same callback fires again, and the graph reports an
    # autosize relayout after every redraw, which would otherwise cancel a step or heatmap choice.
    @app.callback(Output("tl-window", "data"), Output("tl-ranks", "value"), Input("run-a", "value"))
    def new_run(_run_id):
        return None, None  # the whole run, every rank

    @app.callback(Output("tl-window", "data", allow_duplicate=True), Input("tl-graph", "relayoutData"),
                  prevent_initial_call=True)
    def zoom(relayout):
        win = window_from_relayout(relayout)
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
        view = ctx.registry.get(run_id) if run_id else None
        win = derive.step_window(view.tables, int(step)) if view is not None and step is not None else None
        if win is None:
            raise PreventUpdate
        return list(win)

    @app.callback(Output("tl-window", "data", allow_duplicate=True),
                  Output("tl-ranks", "value", allow_duplicate=True), Output("tabs", "value"),
                  Input("neg-heatmap", "clickData"), State("run-a", "value"), prevent_initial_call=True)
    def open_heatmap_cell(click, run_id):
        if not click or not click.get("points"):
            raise PreventUpdate
        point = click["points"][0]
        rank, step = int(point["y"]), int(point["x"])
        view = ctx.registry.get(run_id) if run_id else None
        win = derive.step_window(view.tables, step, rank) if view is not None else None
        # a Horovod timeline holds rank 0's lanes only: then keep every lane rather than show none
        lanes = [rank] if view is not None and rank in view.timeline.ranks else None
        return (list(win) if win else None), lanes, "timeline"

    @app.callback(Output("tl-graph", "figure"), Input("tabs", "value"), Input("run-a", "value"),
                  Input("tl-window", "data"), Input("tl-ranks", "value"), Input("tl-critical", "value"))
    def draw(tab, run_id, window, ranks, critical):
        if tab != "timeline" or not run_id:
            raise PreventUpdate
        view = ctx.registry.get(run_id)
        if view is None:
            raise PreventUpdate
        t0, t1 = window if window else (None, None)
        win = view.timeline.window(t0, t1, ranks=ranks or None, px=PIXELS, max_bars=MAX_BARS)
        fig = timeline_figure(win, title=view.label + ":")
        add_reset_bands(fig, view.recoveries, win.lanes, win.t0_ns, win.t1_ns)
        if critical:
            add_critical_path(fig, view.critical_path, win.lanes, win.t0_ns, win.t1_ns)
        return fig
