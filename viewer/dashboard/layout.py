"""The page skeletons: a header (run choice, picker, upload, banner) and one tab per page.

Every component lives in the layout from the start, so callbacks never target a missing id; the
pages fill their graphs only when their tab is open.
"""
from __future__ import annotations

from dash import dcc, html

PAGES = [("overview", "Overview"), ("timeline", "Timeline"), ("breakdown", "Breakdown"), ("negotiation", "Negotiation"),
         ("fusion", "Fusion"), ("communication", "Communication"), ("compare", "Compare"), ("whatif", "What if")]
GRAPH_CONFIG = {"displaylogo": False, "responsive": True}


def _graph(gid: str, **kw):
    return dcc.Graph(id=gid, config=GRAPH_CONFIG, **kw)


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
    hint = html.P("No run loaded yet: pick one under the trace root or upload a trace above.",
                  className="muted", id="no-run-hint")
    return html.Div([html.Div(hint, id="overview-body"), html.H3("Recommendations"),
                     dcc.Loading(html.Div(id="overview-findings"), type="dot")], className="page")


def timeline_page():
    return html.Div([
        html.Div([html.Label("ranks"), dcc.Dropdown(id="tl-ranks", multi=True, placeholder="all ranks",
                                                     style={"minWidth": "260px"}),
                  html.Label("go to step"),
                  dcc.Input(id="tl-step", type="number", min=0, step=1, placeholder="step"),
                  html.Button("Whole run", id="tl-reset", n_clicks=0),
                  dcc.Checklist(id="tl-critical", options=[{"label": " critical path", "value": "on"}], value=[],
                                inline=True),
                  html.Span("drag to zoom; double-click to reset", className="muted")], className="controls"),
        dcc.Store(id="tl-window"),
        dcc.Loading(_graph("tl-graph"), type="circle"),
    ], className="page")


def breakdown_page():
    return html.Div([_graph("bd-bars"), html.H3("Why the late ranks are late"), html.Div(id="bd-causes"),
                     html.H3("Mean per step, per rank (ms; ? = phases unknown: no phase spans on that rank)"),
                     html.Div(id="bd-table")], className="page")


def negotiation_page():
    return html.Div([_graph("neg-heatmap"), _graph("neg-last"),
                     html.H3("Per-tensor wait (first to last rank ready)"), html.Div(id="neg-table")],
                    className="page")


def fusion_page():
    return html.Div([html.Div(id="fus-facts"),
                     html.Div([_graph("fus-fill"), _graph("fus-count")], className="two-col"),
                     _graph("fus-memcpy")], className="page")


def communication_page():
    return html.Div([
        html.Div([html.Label("peak busbw (GB/s, optional)"),
                  dcc.Input(id="comm-peak", type="number", min=0, debounce=True,
                            placeholder="best observed")], className="controls"),
        _graph("comm-busbw"), html.H3("By message size (nccl-tests style)"), html.Div(id="comm-table")],
        className="page")


def compare_page():
    return html.Div([html.Div(id="cmp-body"),
                     html.Div([_graph("cmp-stragglers"), _graph("cmp-fusion")], className="two-col"),
                     _graph("cmp-bandwidth")], className="page")


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
        _graph("wi-steps"),
        _graph("wi-timeline"),
        html.H3("Communication fit"), html.Div(id="wi-fits"),
    ], className="page")


_BUILDERS = {"overview": overview_page, "timeline": timeline_page, "breakdown": breakdown_page,
             "negotiation": negotiation_page, "fusion": fusion_page, "communication": communication_page,
             "compare": compare_page, "whatif": whatif_page}


def build_layout(run_options, run_a, run_b, picker_options, max_upload_mb, banner_children=(),
                 banner_class="banner hidden"):
    """The whole app layout."""
    tabs = dcc.Tabs(id="tabs", value="overview", children=[
        dcc.Tab(label=label, value=value, id=f"tab-{value}", children=_BUILDERS[value]())
        for value, label in PAGES])
    return html.Div([header(run_options, run_a, run_b, picker_options, max_upload_mb,
                            list(banner_children), banner_class), tabs])
