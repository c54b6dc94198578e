"""An elastic run's resets on the timeline (a band across every lane, its cause on hover) and the
Recoveries table of the Overview (docs/ELASTIC.md)."""
from __future__ import annotations

import plotly.graph_objects as go
from dash import html

from viewer.dashboard.components import table

RESET_COLOUR = "#d62728"
REDONE_COLOUR = "#ff9896"
_TABLE = {"reset": "#", "kind": "kind", "cause": "cause", "sizes": "size", "detect_ms": "detect ms",
          "reform_ms": "re-form ms", "restore_ms": "restore ms", "first_step_ms": "first step ms",
          "lost_ms": "lost ms", "redone_ms": "redone ms", "share_pct": "% of job", "biggest": "biggest part",
          "missing": "ranks without ELASTIC_RESET"}


def _ms(v) -> str:
    return "?" if v is None or v != v else f"{v:,.1f} ms"


def reset_text(r) -> str:
    """The hover of one reset's band: cause, membership, each part and the work redone."""
    return (f"<b>reset {r['reset']}: {r['kind']}</b> ({r['size_before']} → {r['size_after']} ranks)<br>{r['cause']}"
            f"<br>lost {_ms(r['lost_ms'])}: detection {_ms(r['detect_ms'])}, re-forming {_ms(r['reform_ms'])}, "
            f"restoring {_ms(r['restore_ms'])}, first step {_ms(r['first_step_ms'])}"
            f"<br>work redone since the last commit (step {r['last_commit_step']}): {_ms(r['redone_ms'])}"
            f"<br>{r['share_pct']:.1f} % of the job")


def add_reset_bands(fig: go.Figure, rec, lanes: list, t0_ns: int, t1_ns: int) -> None:
    """One translucent bar per lane from each reset's failure to the end of the first step after (and a
    lighter one over the work redone before it), drawn under the spans, hovering the reset's cause."""
    if rec is None or not len(rec) or not lanes:
        return
    bands = {"reset": ([], [], [], [], RESET_COLOUR), "work redone": ([], [], [], [], REDONE_COLOUR)}
    for r in rec.to_dict("records"):
        text = reset_text(r)
        end = r["first_step_end_ns"] if r["first_step_end_ns"] is not None else r["restored_ns"]
        spans = [("reset", r["failed_ns"], end)]
        if r["redone_ms"]:
            spans.append(("work redone", r["failed_ns"] - int(r["redone_ms"] * 1e6), r["failed_ns"]))
        for name, a, b in spans:
            if a is None or b is None or b <= t0_ns or a >= t1_ns:
                continue
            y, base, width, texts, _ = bands[name]
            for lane in lanes:
                y.append(lane)
                base.append(a / 1e6)
                width.append((b - a) / 1e6)
                texts.append(text)
    traces = []
    for name, (y, base, width, texts, colour) in bands.items():
        if y:
            traces.append(go.Bar(name=name, orientation="h", y=y, base=base, x=width, width=1.0,
                                 marker={"color": colour, "opacity": 0.22, "line": {"width": 0}},
                                 hovertext=texts, hoverinfo="text", meta="elastic"))
    fig.add_traces(traces)
    fig.data = fig.data[-len(traces):] + fig.data[:-len(traces)]   # under the spans


def recoveries_block(rec):
    """The Overview's Recoveries section ([] for a run without resets)."""
    if rec is None or not len(rec):
        return []
    df = rec.assign(sizes=[f"{a} → {b}" for a, b in zip(rec["size_before"], rec["size_after"])],
                    missing=[", ".join(map(str, m)) or "–" for m in rec["ranks_missing_slice"]])
    df = df[list(_TABLE)].rename(columns=_TABLE)
    fmt = {c: "{:,.1f}" for c in _TABLE.values() if c.endswith(" ms") or c == "% of job"}
    total = float(rec["share_pct"].sum())
    return [html.H3("Recoveries"),
            html.P(f"{len(rec)} reset(s) of the world cost {total:.1f} % of the job (lost = failure → end of the "
                   "first step after; redone = last commit → failure). On the timeline: red bands.",
                   className="muted"),
            table(df, fmt, table_id="recoveries-table")]
