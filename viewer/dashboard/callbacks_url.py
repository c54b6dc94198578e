"""The view in the URL's query string (run, page, step, ranks, window): every change writes it, and opening a URL
(a copied link, a finding's evidence, a heatmap cell) restores it."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, urlencode

from dash import Input, Output, State, no_update
from dash.exceptions import PreventUpdate

from viewer.dashboard.layout import PAGES
from viewer.findings.rule import step_window

_WINDOW = re.compile(r"(-?\d+)_(-?\d+)")


def href(run_id, page, step=None, ranks=(), window=None) -> str:
    """The query string of a view; ``window``: (t0_ns, t1_ns) on the run's axis."""
    q = {"run": run_id, "page": page, "step": None if step is None else int(step),
         "ranks": ",".join(str(int(r)) for r in sorted(ranks or ())) or None,
         "window": None if not window else f"{int(window[0])}_{int(window[1])}"}
    return "?" + urlencode({k: v for k, v in q.items() if v is not None}, safe=",")


def parse(search: str) -> dict:
    """A query string's view; what it lacks or cannot be read is None."""
    q = {k: v[-1] for k, v in parse_qs((search or "").lstrip("?")).items()}
    window = _WINDOW.fullmatch(q.get("window", ""))
    return {"run": q.get("run"), "page": q.get("page"),
            "step": int(q["step"]) if q.get("step", "").isdigit() else None,
            "ranks": [int(r) for r in q.get("ranks", "").split(",") if r.isdigit()] or None,
            "window": [int(window[1]), int(window[2])] if window else None}


def register(app, ctx):
    pages = {value for value, _ in PAGES}

    # The layout opens on no page, so the first restore chooses it (the URL's, else the Overview) and a body is
    # drawn once, for the URL's view; a restore sets only what changed (a value set again redraws what reads it).
    # The timeline's window, ranks and step follow url-pending (callbacks_timeline's view), set first: Dash asks
    # for the callbacks of a response's outputs in their order and holds one while an asked one writes its inputs,
    # so the view holds the timeline's graph and the URL until it has set them (one draw, one write).
    @app.callback(Output("url-pending", "data"), Output("run-a", "value", allow_duplicate=True),
                  Output("tabs", "value", allow_duplicate=True), Input("url", "search"), State("url-written", "data"),
                  State("run-a", "value"), State("tabs", "value"), prevent_initial_call="initial_duplicate")
    def restore(search, written, run_now, page_now):
        if search == written:
            raise PreventUpdate   # the view this page just wrote
        q = parse(search)
        run = q["run"] if q["run"] and ctx.registry.get(q["run"]) is not None else run_now
        page = q["page"] if q["page"] in pages else page_now or "overview"
        return {**q, "search": search}, run if run != run_now else no_update, page if page != page_now else no_update

    # allow_duplicate on what writes the URL: Dash names such an output apart (search@<hash>), so restore, which
    # reads the URL, is not downstream of the view it restored; else every callback here is downstream of every
    # other (a loop), and Dash, holding none, runs them in any order
    @app.callback(Output("url", "search", allow_duplicate=True), Output("url-written", "data"), Input("run-a", "value"),
                  Input("tabs", "value"), Input("tl-step", "value"), Input("tl-ranks", "value"),
                  Input("tl-window", "data"), State("url-pending", "data"), prevent_initial_call=True)
    def write(run_id, page, step, ranks, window, restored):
        if restored is None:
            raise PreventUpdate   # the page is still opening: the URL it was opened with is not read yet
        search = href(run_id, page, step, ranks, window)
        return search, search

    # one callback per heatmap: Dash fires a callback only while all its inputs are on the page, and only the
    # open tab's heatmap is
    for heatmap in ("ov-heatmap", "neg-heatmap"):
        @app.callback(Output("url", "search", allow_duplicate=True), Input(heatmap, "clickData"),
                      State("run-a", "value"), prevent_initial_call=True)
        def open_heatmap_cell(click, run_id):
            """A lateness cell opens the timeline at its step, its rank pinned."""
            if not click or not click.get("points"):
                raise PreventUpdate
            held = ctx.registry.get(run_id)
            if held is None:
                raise PreventUpdate
            step, rank = int(click["points"][0]["x"]), int(click["points"][0]["y"])
            # the window itself, as the old callback opened it: one restore, not a step box that sets it later
            return href(run_id, "timeline", ranks=[rank], window=step_window(held.run, step, [rank]))
