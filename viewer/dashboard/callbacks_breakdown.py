"""Breakdown page: stacked bars per rank, the root causes of late ranks and the per-rank table."""
from __future__ import annotations

from dash import Input, Output, html
from dash.exceptions import PreventUpdate

from viewer.dashboard import fig_breakdown
from viewer.dashboard.components import table

_MS_COLUMNS = {"step_ns": "step", "data_wait_ns": "data wait", "forward_ns": "forward", "backward_ns": "backward",
               "optimizer_ns": "optimizer", "exposed_comm_ns": "exposed comm", "other_ns": "other"}


def breakdown_table(by_rank):
    """Per rank, mean per step in ms; '?' where a rank's phases are unknown."""
    if by_rank is None or not len(by_rank):
        return by_rank
    out = by_rank[["rank", "step"]].rename(columns={"step": "steps"}).copy()
    for col, label in _MS_COLUMNS.items():
        out[label] = [("?" if col in ("data_wait_ns", "forward_ns", "backward_ns", "optimizer_ns") and not known
                       else "–" if v != v or v is None else f"{v / 1e6:,.2f}")
                      for v, known in zip(by_rank[col].astype("float64"), by_rank["phases_known"])]
    out["phases"] = ["known" if k else "unknown" for k in by_rank["phases_known"]]
    return out


def root_cause_block(causes):
    if causes is None or not len(causes):
        return html.P("no rank is late enough to need a cause", className="muted", id="bd-rootcause")
    return html.Ul([html.Li([html.B(f"rank {int(r.rank)} (late): ") if r.late else None, r.message],
                            className="finding") for r in causes.itertuples(index=False)], id="bd-rootcause")


def register(app, ctx):
    @app.callback(Output("bd-bars", "figure"), Output("bd-causes", "children"), Output("bd-table", "children"),
                  Input("tabs", "value"), Input("run-a", "value"))
    def breakdown(tab, run_id):
        view = ctx.registry.get(run_id) if tab == "breakdown" and run_id else None
        if view is None:
            raise PreventUpdate
        by_rank = view.breakdown_by_rank
        return (fig_breakdown.breakdown_bars(by_rank), root_cause_block(view.root_causes),
                table(breakdown_table(by_rank), table_id="bd-rank-table"))
