"""Building blocks shared by the pages: an analysis's declared table as a sortable, paged grid, headline cards,
facts, written empty states, banners. Every figure in them is formatted by ``viewer.units``."""
from __future__ import annotations

import math

import dash_ag_grid as dag
import dash_mantine_components as dmc
from dash import dcc, html

from viewer import registry, units
from viewer.cli.tables import cell, shown_columns
from viewer.summary import rows_of

GRAPH_CONFIG = {"displaylogo": False, "responsive": True}
PAGE_ROWS = 10
MAX_ROWS = 1000   # sent to the browser per table


def _id(eid) -> dict:
    return {"id": eid} if eid else {}


def graph(gid: str, fig) -> dcc.Graph:
    return dcc.Graph(id=gid, figure=fig, config=GRAPH_CONFIG)


def empty(text: str, eid: str | None = None):
    """Where a figure or a table has nothing to show: what is missing, in words."""
    return dmc.Alert(text[:1].upper() + text[1:] + ("" if text.endswith(".") else "."), color="gray",
                     variant="light", className="empty", my="xs", **_id(eid))


def unavailable(run, name: str, what: str, eid: str | None = None):
    """``what``'s empty state when the run cannot have analysis ``name`` (``run.why_not``), else None."""
    reason = run.why_not(name)
    return None if reason is None else empty(f"{what}: {reason}", eid)


def _raw(v, c: registry.Column):
    """The value a grid sorts by: the number itself, else the text shown."""
    if c.unit != "text" and isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
        return float(v)
    return cell(v, c) if c.unit != "text" else (None if v is None else str(v))


def table(spec: registry.Table, df, table_id: str | None = None):
    """A declared table (``viewer.registry.Table``) as a grid sorted by its raw values and shown in the CLI's
    units (numbers right-aligned); one row as (label, value) pairs."""
    if df is None or not len(df):
        return empty(f"{spec.title}: nothing to show", table_id)
    df = spec.derive(df) if spec.derive else df
    cols = shown_columns(spec, df)
    if len(df) == 1:
        body = facts([(c.label, cell(df[c.key].iloc[0], c)) for c in cols], table_id)
    else:
        records = (df.tail(MAX_ROWS) if spec.last else df.head(MAX_ROWS))[[c.key for c in cols]].to_dict("records")
        rows = [{k: v for i, c in enumerate(cols) for k, v in ((f"c{i}", _raw(r[c.key], c)),
                                                              (f"t{i}", cell(r[c.key], c)))} for r in records]
        defs = [{"field": f"c{i}", "headerName": c.label, "valueFormatter": {"function": f"params.data.t{i}"},
                 **({} if c.unit == "text" else {"type": "rightAligned"})}
                for i, c in enumerate(cols)]
        body = dag.AgGrid(rowData=rows, columnDefs=defs, columnSize="responsiveSizeToFit", className="grid",
                          defaultColDef={"sortable": True, "resizable": True, "wrapHeaderText": True,
                                         "autoHeaderHeight": True, "minWidth": 80},
                          dashGridOptions={"pagination": len(rows) > PAGE_ROWS, "paginationPageSize": PAGE_ROWS,
                                           "paginationPageSizeSelector": False, "domLayout": "autoHeight",
                                           "suppressColumnVirtualisation": True, "enableCellTextSelection": True},
                          **_id(table_id))
    shown = df.tail(PAGE_ROWS) if spec.last else df
    more = f" ({'last' if spec.last else 'first'} {units.count(MAX_ROWS)} of {units.count(len(df))})" \
        if len(df) > MAX_ROWS else ""
    notes = [dmc.Text(spec.note(r), size="sm", c="dimmed", className="note") for r in shown.itertuples(index=False)
             ] if spec.note else []
    return html.Div([dmc.Title(spec.title + more, order=4, mt="md", mb="xs"), body, *notes])


def analysis_table(run, name: str, table_id: str | None = None, index: int = 0, **params):
    """The ``index``-th declared table of analysis ``name`` over the run's rows of it."""
    a = registry.ANALYSES[name]
    return table(a.tables[index], rows_of(run, a, **params), table_id)


def card(title: str, value: str, detail: str = "", card_id: str | None = None):
    return dmc.Paper([dmc.Text(title, size="xs", c="dimmed", tt="uppercase"),
                      dmc.Text(value, fw=600, fz="xl", className="card-value"),
                      dmc.Text(detail, size="xs", c="dimmed")], withBorder=True, p="sm", className="card",
                     **_id(card_id))


def facts(pairs, table_id: str | None = None):
    """(label, value) pairs, or (label, value, warn) with the warnings marked."""
    return dmc.Table(html.Tbody([html.Tr([html.Th(p[0]), html.Td(str(p[1]))], className="warn" if p[2:3] == (True,)
                                         else None) for p in pairs]), withTableBorder=True, className="facts",
                     w="auto", **_id(table_id))


def banner(kind: str, lines) -> tuple:
    """(children, className) for the banner: kind 'error', 'warning' or 'ok'; no lines hides it."""
    lines = [ln for ln in lines if ln]
    if not lines:
        return [], "banner hidden"
    return [html.Div(ln) for ln in lines], f"banner {kind}"
