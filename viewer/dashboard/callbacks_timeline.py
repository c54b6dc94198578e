"""Timeline callbacks: choose the window (zoom, reset, heatmap click) and draw it aggregated."""
from __future__ import annotations

from dash import Input, Output, ctx as dash_ctx, no_update
from dash.exceptions import PreventUpdate

from viewer.dashboard import derive
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

    @app.callback(Output("tl-window", "data"), Output("tl-ranks", "value"), Output("tabs", "value"),
                  Input("tl-graph", "relayoutData"), Input("tl-reset", "n_clicks"),
                  Input("neg-heatmap", "clickData"), Input("tl-step", "value"), Input("run-a", "value"))
    def choose_window(relayout, _reset, click, step, run_id):
        trigger = dash_ctx.triggered_id
        if trigger == "tl-step":
            view = ctx.registry.get(run_id)
            win = derive.step_window(view.tables, int(step)) if view and step is not None else None
            if win is None:
                raise PreventUpdate
            return list(win), no_update, no_update
        if trigger == "tl-graph":
            win = window_from_relayout(relayout)
            if win is None:
                raise PreventUpdate
            return (None if win == "reset" else list(win)), no_update, no_update
        if trigger == "neg-heatmap" and click and click.get("points"):
            point = click["points"][0]
            rank, step = int(point["y"]), int(point["x"])
            view = ctx.registry.get(run_id)
            win = derive.step_window(view.tables, step, rank) if view else None
            return (list(win) if win else None), [rank], "timeline"
        if trigger == "tl-reset":
            return None, no_update, no_update
        return None, None, no_update  # a new run: whole run, all ranks

    @app.callback(Output("tl-graph", "figure"), Input("tabs", "value"), Input("run-a", "value"),
                  Input("tl-window", "data"), Input("tl-ranks", "value"))
    def draw(tab, run_id, window, ranks):
        if tab != "timeline" or not run_id:
            raise PreventUpdate
        view = ctx.registry.get(run_id)
        if view is None:
            raise PreventUpdate
        t0, t1 = window if window else (None, None)
        win = view.timeline.window(t0, t1, ranks=ranks or None, px=PIXELS, max_bars=MAX_BARS)
        return timeline_figure(win, title=view.label + ":")
