"""Callbacks that fill the analysis pages (overview, negotiation, fusion, communication, compare).

Each one runs only while its tab is open; the work is in ``derive`` and the ``fig_*`` builders.
"""
from __future__ import annotations

from dash import Input, Output, dcc, html, no_update
from dash.exceptions import PreventUpdate

from viewer.dashboard import (
    derive,
    fig_comm,
    fig_compare,
    fig_fusion,
    fig_negotiation,
    fig_overview,
    fig_recoveries,
    kineto_overview,
)
from viewer.dashboard.components import card, facts, fmt, table
from viewer.dashboard.pages_text import compare_rows, findings_block, run_facts


def _view(ctx, tab, want, run_id):
    if tab != want or not run_id:
        raise PreventUpdate
    view = ctx.registry.get(run_id)
    if view is None:
        raise PreventUpdate
    return view


def headline_cards(view, peak=None):
    h = view.headline(peak)
    strag = ("n/a" if h["straggler_rank"] is None else f"rank {h['straggler_rank']}")
    strag_detail = ("" if h["straggler_rank"] is None else
                    f"last in {h['straggler_share'] * 100:.0f} % of negotiations, "
                    f"{h['straggler_wait_ms']:,.1f} ms imposed")
    eff_detail = "" if not h["peak_gbps"] else (f"large {h.get('busbw_op', '')} ops' median busbw vs "
                                                f"{h['peak_gbps']:.2f} GB/s")
    return html.Div([
        card("step time", fmt(h["step_ms"], "{:,.2f} ms"), "median over steps", "card-step"),
        card("exposed communication", fmt(h["exposed_pct"], "{:.1f} %"), "time blocked in synchronize / step",
             "card-exposed"),
        card("busbw efficiency", fmt(None if h["busbw_eff"] is None else h["busbw_eff"] * 100, "{:.1f} %"),
             eff_detail, "card-busbw"),
        card("worst straggler", strag, strag_detail, "card-straggler"),
    ], className="cards")


def links_block(view) -> list:
    """On two or more hosts: intra-host and cross-host traffic and busbw per op size."""
    if view.run.why_not("links"):
        return []
    links = view.run.links()
    if not len(links):
        return []
    shown = links.assign(busbw_gbit=links["busbw_gbps"] * 8, busbw_max_gbit=links["busbw_max_gbps"] * 8).drop(
        columns=["busbw_gbps", "busbw_max_gbps"])
    fmts = {"size_bytes": "{:,}", "traffic_bytes": "{:,}", "time_us": "{:,.1f}", "busbw_gbit": "{:.3f}",
            "busbw_max_gbit": "{:.3f}"}
    return [html.H3("Intra-host and cross-host links (busbw in Gbit/s; a flat ring's hops all run at its "
                    "slowest link's pace)"), table(shown, fmts, max_rows=60, table_id="comm-links-table")]


def register(app, ctx):
    @app.callback(Output("overview-body", "children"), Input("tabs", "value"), Input("run-a", "value"))
    def overview(tab, run_id):
        if tab == "overview" and run_id and ctx.registry.get(run_id) is None and run_id in ctx.registry.evicted:
            return html.P(f"{ctx.registry.evicted[run_id]} ({run_id}) was unloaded to make room for newer "
                          "runs: open or upload it again.", className="muted", id="evicted-hint")
        view = _view(ctx, tab, "overview", run_id)

        return [html.H2(f"Run {view.label}"), headline_cards(view),
                dcc.Graph(id="ov-steps", figure=fig_overview.step_time_figure(view.step_spans),
                          config={"displaylogo": False}),
                *kineto_overview.block(view.tables), *fig_recoveries.recoveries_block(view.recoveries),
                html.H3("Run facts"), facts(run_facts(view))]

    @app.callback(Output("overview-findings", "children"), Input("tabs", "value"), Input("run-a", "value"))
    def findings(tab, run_id):  # separate: the analyses' findings take seconds on a big run
        return findings_block(_view(ctx, tab, "overview", run_id))

    @app.callback(Output("neg-heatmap", "figure"), Output("neg-last", "figure"), Output("neg-table", "children"),
                  Input("tabs", "value"), Input("run-a", "value"))
    def negotiation(tab, run_id):
        view = _view(ctx, tab, "negotiation", run_id)
        waits = derive.tensor_waits(view.late)
        return (fig_negotiation.lateness_heatmap(derive.lateness_matrix(view.late), view.hosts),
                fig_negotiation.times_last_bar(view.stragglers, view.hosts),
                table(waits, {"mean_wait_ms": "{:,.3f}", "max_wait_ms": "{:,.3f}"}, table_id="neg-wait-table"))

    @app.callback(Output("fus-facts", "children"), Output("fus-fill", "figure"), Output("fus-count", "figure"),
                  Output("fus-memcpy", "figure"), Input("tabs", "value"), Input("run-a", "value"))
    def fusion(tab, run_id):
        view = _view(ctx, tab, "fusion", run_id)
        fus, thr = view.fusion, derive.fusion_threshold(view.tables)
        full = float((fus["fill"] >= 0.9).mean() * 100) if len(fus) and fus["fill"].notna().any() else None
        pairs = [("fused ops", f"{len(fus):,}"), ("fusion threshold", fmt(thr, "{:,} B")),
                 ("tensors per op (mean)", fmt(float(fus["count"].mean()) if len(fus) else None, "{:.2f}")),
                 ("ops filled ≥ 90 %", fmt(full, "{:.1f} %"))]
        return (facts(pairs), fig_fusion.fill_histogram(fus, thr), fig_fusion.count_histogram(fus, thr),
                fig_fusion.memcpy_share_histogram(fus))

    @app.callback(Output("comm-busbw", "figure"), Output("comm-table", "children"), Input("tabs", "value"),
                  Input("run-a", "value"), Input("comm-peak", "value"))
    def communication(tab, run_id, peak):
        view = _view(ctx, tab, "communication", run_id)
        comm = view.comm
        best = float(comm["busbw"].max()) if len(comm) else None
        fig = fig_comm.busbw_figure(comm, derive.alpha_beta(comm), peak or best, peak_given=bool(peak))
        fmts = {"time_us": "{:,.1f}", "algbw": "{:.3f}", "busbw": "{:.3f}", "size": "{:,}", "count": "{:,}"}
        return fig, [table(derive.nccl_table(comm), fmts, max_rows=40, table_id="comm-nccl-table"),
                     *links_block(view)]

    @app.callback(Output("cmp-body", "children"), Output("cmp-stragglers", "figure"),
                  Output("cmp-fusion", "figure"), Output("cmp-bandwidth", "figure"),
                  Input("tabs", "value"), Input("run-a", "value"), Input("run-b", "value"))
    def compare(tab, run_a, run_b):
        a = _view(ctx, tab, "compare", run_a)
        b = ctx.registry.get(run_b) if run_b else None
        if b is None:
            msg = html.P("Choose a second run in 'compare with' (or open/upload one) to compare.",
                         className="muted", id="cmp-hint")
            return msg, no_update, no_update, no_update
        body = [html.H2(f"{a.label} vs {b.label}"),
                table(compare_rows(a, b), table_id="cmp-table")]
        last_a, last_b = a.stragglers, b.stragglers
        return (body, fig_compare.straggler_compare(last_a, last_b, a.label, b.label),
                fig_compare.fusion_compare(a.fusion, b.fusion, a.label, b.label),
                fig_compare.bandwidth_compare(a.comm, b.comm, a.label, b.label))
