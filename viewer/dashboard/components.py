"""Small HTML building blocks shared by the pages: an analysis's declared table, headline cards, facts,
written empty states, banners. Every figure in them is formatted by ``viewer.units``."""
from __future__ import annotations

from dash import dcc, html

from viewer import registry, units
from viewer.cli.tables import cell, shown_columns
from viewer.summary import rows_of

GRAPH_CONFIG = {"displaylogo": False, "responsive": True}
MAX_ROWS = 50


def _id(eid) -> dict:
    return {"id": eid} if eid else {}


def graph(gid: str, fig) -> dcc.Graph:
    return dcc.Graph(id=gid, figure=fig, config=GRAPH_CONFIG)


def empty(text: str, eid: str | None = None) -> html.P:
    """Where a figure or a table has nothing to show: what is missing, in words."""
    return html.P(text[:1].upper() + text[1:] + ("" if text.endswith(".") else "."), className="empty",
                  **_id(eid))


def unavailable(run, name: str, what: str, eid: str | None = None) -> html.P | None:
    """``what``'s empty state when the run cannot have analysis ``name`` (``run.why_not``), else None."""
    reason = run.why_not(name)
    return None if reason is None else empty(f"{what}: {reason}", eid)


def table(spec: registry.Table, df, table_id: str | None = None, top: int = MAX_ROWS):
    """A declared table (``viewer.registry.Table``) as the CLI prints it; one row as (label, value) pairs."""
    if df is None or not len(df):
        return empty(f"{spec.title}: nothing to show", table_id)
    df = spec.derive(df) if spec.derive else df
    cols = shown_columns(spec, df)
    shown = df.tail(top) if spec.last else df.head(top)
    if len(df) == 1:
        body = facts([(c.label, cell(df[c.key].iloc[0], c)) for c in cols], table_id)
    else:
        align = ["text" if c.unit == "text" else "num" for c in cols]
        head = html.Thead(html.Tr([html.Th(c.label, className=a) for c, a in zip(cols, align)]))
        rows = [html.Tr([html.Td(cell(v, c), className=a) for c, a, v in zip(cols, align, r)])
                for r in shown[[c.key for c in cols]].itertuples(index=False)]
        body = html.Table([head, html.Tbody(rows)], className="data", **_id(table_id))
    more = (f" ({'last' if spec.last else 'first'} {len(shown)} of {units.count(len(df))})"
            if len(shown) < len(df) else "")
    notes = [html.P(spec.note(r), className="note") for r in shown.itertuples(index=False)] if spec.note else []
    return html.Div([html.H3(spec.title + more), body, *notes])


def analysis_table(run, name: str, table_id: str | None = None, index: int = 0, **params):
    """The ``index``-th declared table of analysis ``name`` over the run's rows of it."""
    a = registry.ANALYSES[name]
    return table(a.tables[index], rows_of(run, a, **params), table_id)


def card(title: str, value: str, detail: str = "", card_id: str | None = None):
    return html.Div([html.Div(title, className="card-title"), html.Div(value, className="card-value"),
                     html.Div(detail, className="card-detail")], className="card", **_id(card_id))


def facts(pairs, table_id: str | None = None) -> html.Table:
    return html.Table([html.Tbody([html.Tr([html.Th(k), html.Td(str(v))]) for k, v in pairs])],
                      className="facts", **_id(table_id))


def banner(kind: str, lines) -> tuple:
    """(children, className) for the banner: kind 'error', 'warning' or 'ok'; no lines hides it."""
    lines = [ln for ln in lines if ln]
    if not lines:
        return [], "banner hidden"
    return [html.Div(ln) for ln in lines], f"banner {kind}"
