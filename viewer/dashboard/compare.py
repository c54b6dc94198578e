"""The Compare page's head, built on ``ringscope diff`` (``viewer.diff``): the verdict, the phase waterfall,
the movers, the settings that differ and a link into each run's timeline at a representative step."""
from __future__ import annotations

import weakref

import dash_mantine_components as dmc
import pandas as pd
from dash import dcc

from viewer.dashboard.callbacks_url import href
from viewer.dashboard.components import empty, graph, table
from viewer.dashboard.fig_diff import phase_waterfall
from viewer.diff.compare import diff_runs
from viewer.diff.settings import show
from viewer.findings.rule import step_window
from viewer.registry import Column, Table

MOVERS = Table("Movers: the biggest change of time per step", (
    Column("name", "name"), Column("kind", "kind"), Column("matched_by", "matched by"), Column("a_ms", "A", "ms"),
    Column("b_ms", "B", "ms"), Column("delta_ms", "change", "ms"), Column("delta_pct", "%", "pct")))
SETTINGS = Table("Settings that differ", (Column("name", "setting"), Column("a", "A"), Column("b", "B")))
_DIFFS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # run A -> {id(run B): (run B, its diff)}


def diff_of(a, b) -> dict:
    """The diff of held runs ``a`` and ``b``, computed once per pair of loaded runs."""
    mine = _DIFFS.setdefault(a.run, {})
    got = mine.get(id(b.run))
    if got is None or got[0] is not b.run:
        got = mine[id(b.run)] = (b.run, diff_runs(a.run, b.run, a.label, b.label))
    return got[1]


def _timeline_link(held, side: dict, which: str):
    step = side["representative_step"]
    if step is None:
        return dmc.Text(f"{which}: no step to open (the run marks none)", size="sm")
    to = href(held.id, "timeline", step=step, window=step_window(held.run, step))
    return dcc.Link(f"{which}'s timeline at step {step} (its median step)", href=to, className="evidence",
                    id=f"cmp-link-{which.lower()}")


def head(a, b) -> list:
    """The verdict, the waterfall, the movers, the settings that differ and the two timeline links."""
    d = diff_of(a, b)
    out = [dmc.Alert([dmc.Text(s) for s in (d["verdict"], *d["coincides"], *d["cautions"])], id="cmp-verdict",
                     color="red" if d["significant"] and (d["change_ms"] or 0) > 0 else "gray", variant="light"),
           dmc.Text(f"Compared: {d['compared']}", size="xs", c="dimmed"),
           dmc.Group([_timeline_link(a, d["a"], "A"), _timeline_link(b, d["b"], "B")], my="xs")]
    if d["phases"]:
        out.append(graph("cmp-waterfall", phase_waterfall(d)))
    else:
        out.append(empty("The phase waterfall: " + d["verdict"], "cmp-waterfall"))
    out.append(table(MOVERS, pd.DataFrame(d["movers"], columns=[c.key for c in MOVERS.columns]), "cmp-movers"))
    if d["settings_changed"]:
        rows = [{"name": s["name"], "a": show(s["name"], s["a"]), "b": show(s["name"], s["b"])}
                for s in d["settings_changed"]]
        out.append(table(SETTINGS, pd.DataFrame(rows), "cmp-settings"))
    return out
