"""Small HTML building blocks shared by the pages (tables, headline cards, facts, banners)."""
from __future__ import annotations

import math

from dash import html


def fmt(value, spec: str = "{:,.2f}", none: str = "n/a") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return none
    try:
        return spec.format(value)
    except (ValueError, TypeError):
        return str(value)


def table(df, formats: dict | None = None, max_rows: int = 50, table_id: str | None = None):
    """A plain HTML table of the first ``max_rows`` rows of ``df``."""
    formats = formats or {}
    if df is None or len(df) == 0:
        return html.P("nothing to show", className="muted", **({"id": table_id} if table_id else {}))
    head = html.Thead(html.Tr([html.Th(str(c)) for c in df.columns]))
    rows = []
    for rec in df.head(max_rows).itertuples(index=False):
        rows.append(html.Tr([html.Td(fmt(v, formats[c]) if c in formats else fmt(v, "{}"))
                             for c, v in zip(df.columns, rec)]))
    more = [html.Caption(f"first {max_rows} of {len(df):,} rows")] if len(df) > max_rows else []
    kwargs = {"id": table_id} if table_id else {}
    return html.Table(more + [head, html.Tbody(rows)], className="data", **kwargs)


def card(title: str, value: str, detail: str = "", card_id: str | None = None):
    kwargs = {"id": card_id} if card_id else {}
    return html.Div([html.Div(title, className="card-title"), html.Div(value, className="card-value"),
                     html.Div(detail, className="card-detail")], className="card", **kwargs)


def facts(pairs) -> html.Table:
    """A two-column table of (label, value) pairs."""
    return html.Table([html.Tbody([html.Tr([html.Th(k), html.Td(str(v))]) for k, v in pairs])],
                      className="facts")


def banner(kind: str, lines) -> tuple:
    """(children, className) for the banner: kind 'error', 'warning' or 'ok'; no lines hides it."""
    lines = [ln for ln in lines if ln]
    if not lines:
        return [], "banner hidden"
    return [html.Div(ln) for ln in lines], f"banner {kind}"
