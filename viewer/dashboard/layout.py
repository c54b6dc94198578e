"""The page skeletons: a header (run choice, picker, upload, banner) and a tab per page that applies to the run,
each its controls and a body its callback fills while the tab is open (the timeline's graph stays: its callbacks
read it). Light or dark follows the system."""
from __future__ import annotations

import dash_mantine_components as dmc
from dash import dcc, html

from viewer.dashboard.components import GRAPH_CONFIG

PAGES = [("overview", "Overview"), ("timeline", "Timeline"), ("breakdown", "Breakdown"), ("negotiation", "Negotiation"),
         ("fusion", "Fusion"), ("communication", "Communication"), ("compare", "Compare"), ("whatif", "What if")]


def body(page: str, *controls, content=None):
    """A page: its controls, then the body its callback fills, hidden behind a spinner only while that callback
    runs (not while a part of the body loads, as the Overview's charts after its verdict)."""
    return html.Div([*controls, dcc.Loading(html.Div(content, id=f"{page}-body"), type="dot",
                                            target_components={f"{page}-body": "children"})], className="page")


def controls(*children):
    return dmc.Group(children, gap="sm", align="flex-end", mb="xs")


def header(run_options, run_a, run_b, picker_options, max_upload_mb: float, banner_children, banner_class):
    return html.Div([
        dmc.Group([
            dmc.Title("ringscope", order=3),
            dmc.Select(id="run-a", label="run", data=run_options, value=run_a, allowDeselect=False, w=240),
            dmc.Select(id="run-b", label="compare with", data=run_options, value=run_b, clearable=True, w=240),
            dmc.Select(id="picker-list", label="open from trace root", data=picker_options, searchable=True,
                       placeholder="runs under the root", w=220),
            dmc.TextInput(id="picker-path", placeholder="relative/path", debounce=True, w=170),
            dmc.Button("Open", id="picker-open", n_clicks=0, variant="default"),
            dcc.Upload(id="upload", children=dmc.Text(f"Upload a trace (≤ {max_upload_mb:g} MB)", size="sm"),
                       className="upload", multiple=False),
        ], gap="sm", align="flex-end", className="top"),
        html.Div(banner_children, id="banner", className=banner_class, role="alert"),
    ])


def overview_page():
    return body("overview", content=dmc.Text("No run loaded yet: pick one under the trace root or upload a trace "
                                             "above.", c="dimmed", id="no-run-hint"))


def timeline_page():
    return html.Div([
        controls(dcc.Dropdown(id="tl-ranks", multi=True, placeholder="all ranks", style={"minWidth": "260px"}),
                 dcc.Dropdown(id="tl-expand", multi=True, placeholder="threads of: one lane a rank",
                              style={"minWidth": "200px"}),
                 dcc.Input(id="tl-step", type="number", min=0, step=1, placeholder="go to step"),
                 dmc.Button("Whole run", id="tl-reset", n_clicks=0, variant="default", size="xs"),
                 dcc.Checklist(id="tl-critical", options=[{"label": " critical path", "value": "on"}], value=[],
                               inline=True),
                 dmc.Tooltip(dmc.Button("Open in Perfetto", id="tl-perfetto", n_clicks=0, variant="default", size="xs"),
                             label="download the ranks and time shown as a Chrome trace (ui.perfetto.dev)"),
                 dmc.Text("drag to zoom; double-click to reset; click a lane for its threads", size="sm",
                          c="dimmed")),
        dcc.Store(id="tl-window"), dcc.Download(id="tl-download"),
        dcc.Loading(dcc.Graph(id="tl-graph", config=GRAPH_CONFIG), type="circle"),
    ], className="page")


def communication_page():
    return body("communication", controls(dmc.NumberInput(id="comm-peak", label="peak busbw (GB/s, optional)",
                                                          min=0, debounce=True, placeholder="best observed", w=200)))


def whatif_page():
    knobs = controls(*(dmc.NumberInput(id=kid, label=label, debounce=True, w=190, **kw) for label, kid, kw in (
        ("fusion threshold (MiB; 0 = off)", "wi-threshold", {"min": 0, "placeholder": "the run's"}),
        ("cycle time (ms)", "wi-cycle", {"min": 0, "placeholder": "the run's"}),
        ("bandwidth x", "wi-bandwidth", {"min": 0.01, "value": 1}),
        ("latency x", "wi-latency", {"min": 0.01, "value": 1}),
        ("ranks (extrapolation)", "wi-ranks", {"min": 2, "allowDecimal": False, "placeholder": "the run's"}))),
        dcc.Checklist(id="wi-flags", options=[{"label": " no straggler", "value": "no_straggler"}], value=[]))
    return body("whatif", knobs)


def page(value: str):
    """The skeleton of page ``value`` (a page without controls: its body alone)."""
    pages = {"overview": overview_page, "timeline": timeline_page, "communication": communication_page,
             "whatif": whatif_page}
    return pages[value]() if value in pages else body(value)


def tab_list(shown) -> list:
    """The tabs of the pages ``shown`` (values of PAGES), in PAGES' order."""
    return [dmc.TabsTab(label, value=value, id=f"tab-{value}") for value, label in PAGES if value in shown]


def build_layout(run_options, run_a, run_b, picker_options, max_upload_mb, banner_children=(),
                 banner_class="banner hidden"):
    tabs = dmc.Tabs([dmc.TabsList(tab_list([v for v, _ in PAGES]), id="tabs-list"),
                     *(dmc.TabsPanel(page(value), value=value) for value, _ in PAGES)],
                    id="tabs", value=None, keepMounted=False)   # no page until the URL is read: callbacks_url
    return dmc.MantineProvider([
        dcc.Location(id="url", refresh=False), dcc.Store(id="url-pending"), dcc.Store(id="url-written"),
        header(run_options, run_a, run_b, picker_options, max_upload_mb, list(banner_children), banner_class), tabs,
    ], defaultColorScheme="auto")
