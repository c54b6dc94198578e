"""The "What if" page's callback: the knobs in, the prediction out (the model is fitted once per run)."""
from __future__ import annotations

import weakref

import pandas as pd
from dash import Input, Output, html
from dash.exceptions import PreventUpdate

from viewer import units
from viewer.dashboard import figures
from viewer.dashboard.components import card, empty, graph, table
from viewer.registry import NEEDS, Column, Table
from viewer.whatif import ModelError, Settings, fit, predict

FITS = Table("The replay's response cost: fixed + per MiB (memcpy included), x(1 + κ x busy), fitted on "
             "each op's busy time", (
    Column("backend", "backend"), Column("op", "op"), Column("n", "ops", "count"), Column("fixed_us", "fixed", "us"),
    Column("us_per_mib", "per MiB", "us"), Column("contention", "κ", "num"),
    Column("median_err_pct", "median error", "pct"), Column("worst_err_pct", "worst error", "pct")))
_MODELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # run -> its fitted model, or why none


def _model(run):
    """The fitted what-if model of a run, or the reason there is none (kept while the run is held)."""
    if run not in _MODELS:
        try:
            _MODELS[run] = fit(run)
        except ModelError as exc:
            _MODELS[run] = str(exc)
    return _MODELS[run]


def settings_of(threshold_mb, cycle_ms, bandwidth, latency, ranks, flags):
    return Settings(None if threshold_mb is None else int(float(threshold_mb) * (1 << 20)),
                    None if cycle_ms is None else float(cycle_ms), "no_straggler" in (flags or []),
                    float(bandwidth or 1), float(latency or 1), int(ranks) if ranks else None)


def summary(run, res):
    """The measured step (the headline's), the replay of the run's own settings and the prediction."""
    step = run.headline()["step_ms"]
    change = 100 * (res["predicted_step_ms"] / res["baseline_step_ms"] - 1)
    return html.Div([
        card("measured step", units.fmt(step, "ms"), "the run's step time (median over steps)" if step is not None
             else f"needs {NEEDS['steps']}", "wi-measured"),
        card("replayed", units.fmt(res["baseline_step_ms"], "ms"),
             f"the run's settings, median over replayed steps; worst step off "
             f"{units.pct(res['baseline_error_pct'])}", "wi-baseline"),
        card("predicted step", units.fmt(res["predicted_step_ms"], "ms"),
             f"{'+' if change > 0 else ''}{units.pct(change)} vs replayed"
             + (" (extrapolated: ring cost model)" if res["extrapolated"] else ""), "wi-predicted"),
    ], className="cards")


def register(app, ctx):
    @app.callback(Output("whatif-body", "children"), Input("tabs", "value"), Input("run-a", "value"),
                  Input("wi-threshold", "value"), Input("wi-cycle", "value"), Input("wi-bandwidth", "value"),
                  Input("wi-latency", "value"), Input("wi-ranks", "value"), Input("wi-flags", "value"))
    def whatif(tab, run_id, thr, cyc, bw, lat, ranks, flags):
        held = ctx.registry.get(run_id) if tab == "whatif" and run_id else None
        if held is None:
            raise PreventUpdate
        model = _model(held.run)
        if isinstance(model, str):
            return empty(f"Nothing to replay in this run: {model}", "wi-none")
        res = predict(model, settings_of(thr, cyc, bw, lat, ranks, flags))
        return [summary(held.run, res), graph("wi-steps", figures.whatif_steps(res["steps"])),
                graph("wi-timeline", figures.whatif_timeline(res["timeline"])),
                table(FITS, pd.DataFrame(res["fits"]), "wi-fit-table")]
