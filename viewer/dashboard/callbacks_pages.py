"""The callbacks that fill the Overview and the analysis pages, each only while its tab is open."""
from __future__ import annotations

from dash import Input, Output, State, no_update
from dash.exceptions import PreventUpdate

from viewer.dashboard import overview, pages
from viewer.dashboard.components import empty
from viewer.dashboard.layout import tab_list

BODIES = {"overview": overview.body, "breakdown": pages.breakdown, "negotiation": pages.negotiation,
          "fusion": pages.fusion}
# what a body reads beside its run: the Negotiation page outlines the view's step on its pinned ranks
VIEW = {"negotiation": (Input("tl-step", "value"), Input("tl-ranks", "value"))}
KNOBS = ("wi-threshold", "wi-cycle", "wi-bandwidth", "wi-latency", "wi-ranks", "wi-flags")


def register(app, ctx):
    def held_of(tab, want, run_id):
        held = ctx.registry.get(run_id) if tab == want and run_id else None
        if held is None:
            raise PreventUpdate
        return held

    @app.callback(Output("tabs-list", "children"), Output("tabs", "value", allow_duplicate=True),
                  Input("run-a", "value"), State("tabs", "value"), prevent_initial_call="initial_duplicate")
    def tabs(run_id, tab):
        """The tabs of the pages that apply to the run; off a page that does not, to the Overview."""
        held = ctx.registry.get(run_id) if run_id else None
        if held is None:
            raise PreventUpdate
        shown = pages.applicable(held.run)
        return tab_list(shown), no_update if tab is None or tab in shown else "overview"   # None: not opened yet

    def fill(page, build):
        @app.callback(Output(f"{page}-body", "children"), Input("tabs", "value"), Input("run-a", "value"),
                      *VIEW.get(page, ()))
        def _fill(tab, run_id, *view):
            if tab == page and run_id and ctx.registry.get(run_id) is None and run_id in ctx.registry.evicted:
                return empty(f"The run {ctx.registry.evicted[run_id]} ({run_id}) was unloaded to make room for newer "
                             "runs: open or upload it again", "evicted-hint")
            return build(held_of(tab, page, run_id), *view)

    for page, build in BODIES.items():
        fill(page, build)

    @app.callback(Output("ov-charts", "children"), Input("ov-charts-run", "data"))
    def overview_charts(run_id):
        held = ctx.registry.get(run_id) if run_id else None
        if held is None:
            raise PreventUpdate
        return overview.charts(held)

    @app.callback(Output("ov-heatmap", "figure"), Input("ov-metric", "value"), State("ov-charts-run", "data"),
                  prevent_initial_call=True)
    def overview_metric(metric, run_id):
        """The rank x step heatmap of another metric."""
        held = ctx.registry.get(run_id) if run_id else None
        if held is None or metric not in held.matrices:
            raise PreventUpdate
        return overview.rank_steps(held, metric)[1].figure

    @app.callback(Output("communication-body", "children"), Input("tabs", "value"), Input("run-a", "value"),
                  Input("comm-peak", "value"))
    def communication(tab, run_id, peak):
        return pages.communication(held_of(tab, "communication", run_id), peak or None)

    @app.callback(Output("compare-body", "children"), Input("tabs", "value"), Input("run-a", "value"),
                  Input("run-b", "value"))
    def compare(tab, run_a, run_b):
        a = held_of(tab, "compare", run_a)
        b = ctx.registry.get(run_b) if run_b else None
        if b is None:
            return empty("Nothing to compare yet: choose a second run in 'compare with' above (or open or upload "
                         "one)", "cmp-hint")
        return pages.compare(a, b)

    @app.callback(Output("whatif-body", "children"), Input("tabs", "value"), Input("run-a", "value"),
                  *(Input(k, "value") for k in KNOBS))
    def whatif(tab, run_id, *knobs):
        return pages.whatif(held_of(tab, "whatif", run_id), *knobs)
