"""The "What if" page's callback: the knobs in, the prediction out (the model is fitted once per run)."""
from __future__ import annotations

import pandas as pd
from dash import Input, Output, html
from dash.exceptions import PreventUpdate

from viewer.dashboard import fig_whatif
from viewer.dashboard.components import card, fmt, table
from viewer.whatif import ModelError, Settings, fit, predict


def _model(view):
    """The fitted what-if model of a run view, or the reason there is none (kept on the view)."""
    if not hasattr(view, "_whatif"):
        try:
            view._whatif = fit(view.run)
        except ModelError as exc:
            view._whatif = str(exc)
    return view._whatif


def settings_of(threshold_mb, cycle_ms, bandwidth, latency, ranks, flags):
    return Settings(None if threshold_mb is None else int(float(threshold_mb) * (1 << 20)),
                    None if cycle_ms is None else float(cycle_ms), "no_straggler" in (flags or []),
                    float(bandwidth or 1), float(latency or 1), int(ranks) if ranks else None)


def summary(res):
    extra = " (extrapolated: ring cost model)" if res["extrapolated"] else ""
    return html.Div([
        card("measured step", fmt(res["measured_step_ms"], "{:,.1f} ms"), "the run's: median over its steps",
             "wi-measured"),
        card("replayed", fmt(res["baseline_step_ms"], "{:,.1f} ms"),
             f"run's settings, median over replayed steps; worst step off {res['baseline_error_pct']:.1f} %",
             "wi-baseline"),
        card("predicted step", fmt(res["predicted_step_ms"], "{:,.1f} ms"),
             f"{100 * (res['predicted_step_ms'] / res['baseline_step_ms'] - 1):+.1f} % vs replayed{extra}",
             "wi-predicted"),
    ], className="cards")


def register(app, ctx):
    @app.callback(Output("wi-summary", "children"), Output("wi-steps", "figure"), Output("wi-timeline", "figure"),
                  Output("wi-fits", "children"), Input("tabs", "value"), Input("run-a", "value"),
                  Input("wi-threshold", "value"), Input("wi-cycle", "value"), Input("wi-bandwidth", "value"),
                  Input("wi-latency", "value"), Input("wi-ranks", "value"), Input("wi-flags", "value"))
    def whatif(tab, run_id, thr, cyc, bw, lat, ranks, flags):
        view = ctx.registry.get(run_id) if tab == "whatif" and run_id else None
        if view is None:
            raise PreventUpdate
        model = _model(view)
        if isinstance(model, str):
            empty = fig_whatif.empty_figure("nothing to replay in this run")
            return html.P(f"{model[0].upper()}{model[1:]}.", className="muted", id="wi-none"), empty, empty, None

        res = predict(model, settings_of(thr, cyc, bw, lat, ranks, flags))
        return (summary(res), fig_whatif.steps_figure(res["steps"]), fig_whatif.timeline_figure(res.get("timeline")),
                table(pd.DataFrame(res["fits"]), table_id="wi-fit-table"))
