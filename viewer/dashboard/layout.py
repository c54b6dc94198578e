"""The page skeletons: a header (run choice, picker, upload, banner) and a tab per page, each its controls and
a body its callback fills while the tab is open (the timeline's graph stays: its callbacks read it)."""
from __future__ import annotations

from dash import dcc, html

from viewer.dashboard.components import GRAPH_CONFIG

PAGES = [("overview", "Overview"), ("timeline", "Timeline"), ("breakdown", "Breakdown"), ("negotiation", "Negotiation"),
         ("fusion", "Fusion"), ("communication", "Communication"), ("compare", "Compare"), ("whatif", "What if")]


def body(page: str, *controls, content=None):
    """A page: its controls, then the body its callback fills."""
    return html.Div([*controls, dcc.Loading(html.Div(content, id=f"{page}-body"), type="dot")], className="page")


def header(run_options, run_a, run_b, picker_options, max_upload_mb: float, banner_children, banner_class):
    return html.Div([
        html.Div([
            html.H1("ringscope"),
            html.Div([html.Label("run"), dcc.Dropdown(id="run-a", options=run_options, value=run_a,
                                                      clearable=False, className="run-select")]),
            html.Div([html.Label("compare with"), dcc.Dropdown(id="run-b", options=run_options, value=run_b,
                                                               className="run-select")]),
            html.Div([html.Label("open from trace root"),
                      html.Div([dcc.Dropdown(id="picker-list", options=picker_options,
                                             placeholder="runs under the root", className="run-select"),
                                dcc.Input(id="picker-path", type="text", placeholder="relative/path",
                                          debounce=True),
                                html.Button("Open", id="picker-open", n_clicks=0)], className="picker")]),
            dcc.Upload(id="upload", children=html.Div(f"Upload a trace (≤ {max_upload_mb:g} MB)"),
                       className="upload", multiple=False),
        ], className="top"),
        html.Div(banner_children, id="banner", className=banner_class, role="alert"),
    ])


def overview_page():
    return body("overview", content=html.P("No run loaded yet: pick one under the trace root or upload a trace "
                                           "above.", className="muted", id="no-run-hint"))


def timeline_page():
    return html.Div([
        html.Div([html.Label("ranks"), dcc.Dropdown(id="tl-ranks", multi=True, placeholder="all ranks",
                                                     style={"minWidth": "260px"}),
                  html.Label("threads of"), dcc.Dropdown(id="tl-expand", multi=True, placeholder="one lane a rank",
                                                         style={"minWidth": "200px"}),
                  html.Label("go to step"),
                  dcc.Input(id="tl-step", type="number", min=0, step=1, placeholder="step"),
                  html.Button("Whole run", id="tl-reset", n_clicks=0),
                  dcc.Checklist(id="tl-critical", options=[{"label": " critical path", "value": "on"}], value=[],
                                inline=True),
                  html.Button("Open in Perfetto", id="tl-perfetto", n_clicks=0,
                              title="download the ranks and time shown as a Chrome trace (ui.perfetto.dev)"),
                  html.Span("drag to zoom; double-click to reset; click a lane for its threads", className="muted")],
                 className="controls"),
        dcc.Store(id="tl-window"), dcc.Download(id="tl-download"),
        dcc.Loading(dcc.Graph(id="tl-graph", config=GRAPH_CONFIG), type="circle"),
    ], className="page")


def communication_page():
    return body("communication", html.Div([html.Label("peak busbw (GB/s, optional)"),
                                           dcc.Input(id="comm-peak", type="number", min=0, debounce=True,
                                                     placeholder="best observed")], className="controls"))


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
    return body("whatif", knobs)


def page(value: str):
    """The skeleton of page ``value`` (a page without controls: its body alone)."""
    pages = {"overview": overview_page, "timeline": timeline_page, "communication": communication_page,
             "whatif": whatif_page}
    return pages[value]() if value in pages else body(value)


def build_layout(run_options, run_a, run_b, picker_options, max_upload_mb, banner_children=(),
                 banner_class="banner hidden"):
    tabs = dcc.Tabs(id="tabs", value="overview", children=[
        dcc.Tab(label=label, value=value, id=f"tab-{value}", children=page(value))
        for value, label in PAGES])
    return html.Div([header(run_options, run_a, run_b, picker_options, max_upload_mb,
                            list(banner_children), banner_class), tabs])
