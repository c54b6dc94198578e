"""The "What if" page: the knobs, predicted against measured step time, and one step's predicted
timeline beside the measured one."""
from __future__ import annotations

from dash import dcc, html

from viewer.dashboard.layout import GRAPH_CONFIG


def _knob(label: str, kid: str, **kw):
    return html.Div([html.Label(label), dcc.Input(id=kid, type="number", debounce=True, **kw)])


def whatif_page():
    knobs = html.Div([
        _knob("fusion threshold (MiB; 0 = off)", "wi-threshold", min=0, placeholder="the run's"),
        _knob("cycle time (ms)", "wi-cycle", min=0, placeholder="the run's"),
        _knob("bandwidth x", "wi-bandwidth", min=0.01, value=1),
        _knob("latency x", "wi-latency", min=0.01, value=1),
        _knob("ranks (extrapolation)", "wi-ranks", min=2, step=1, placeholder="the run's"),
        dcc.Checklist(id="wi-flags", options=[{"label": " no straggler", "value": "no_straggler"}], value=[]),
    ], className="controls")
    return html.Div([
        knobs,
        dcc.Loading(html.Div(id="wi-summary"), type="dot"),
        dcc.Graph(id="wi-steps", config=GRAPH_CONFIG),
        dcc.Graph(id="wi-timeline", config=GRAPH_CONFIG),
        html.H3("Communication fit"), html.Div(id="wi-fits"),
    ], className="page")
