"""Timeline callbacks: choose the window (zoom, reset, a step, a heatmap click) and draw it aggregated.
The window is kept in ns on the run's axis (as the analyses' windows); the axis shows ms since the run's
first event."""
from __future__ import annotations

from dash import Input, Output, State
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

    @app.callback(Output("tl-window", "data", allow_duplicate=True),
                  Output("tl-ranks", "value", allow_duplicate=True), Output("tabs", "value", allow_duplicate=True),
                  Input("neg-heatmap", "clickData"), State("run-a", "value"), prevent_initial_call=True)
    def open_heatmap_cell(click, run_id):
        if not click or not click.get("points"):
            raise PreventUpdate
        held = held_of(run_id)
        rank, step = int(click["points"][0]["y"]), int(click["points"][0]["x"])
        win = step_window(held.run, step, [rank])
        # a Horovod timeline holds rank 0's lanes only: then keep every lane rather than show none
        return (list(win) if win else None), ([rank] if rank in held.timeline.ranks else None), "timeline"

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
