"""An elastic run's resets on the timeline: a band across every lane, its cause on hover (docs/ELASTIC.md)."""
from __future__ import annotations

import functools

import plotly.graph_objects as go

from viewer import units

RESET_COLOUR = "#d62728"
REDONE_COLOUR = "#ff9896"


def reset_text(r) -> str:
    """The hover of one reset's band: cause, membership, each part and the work redone."""
    ms = functools.partial(units.fmt, unit="ms")
    return (f"<b>reset {r['reset']}: {r['kind']}</b> ({r['size_before']} → {r['size_after']} ranks)<br>{r['cause']}"
            f"<br>lost {ms(r['lost_ms'])}: detection {ms(r['detect_ms'])}, re-forming {ms(r['reform_ms'])}, "
            f"restoring {ms(r['restore_ms'])}, first step {ms(r['first_step_ms'])}"
            f"<br>work redone since the last commit (step {r['last_commit_step']}): {ms(r['redone_ms'])}"
            f"<br>{units.pct(r['share_pct'])} of the job")


def add_reset_bands(fig: go.Figure, rec, win) -> None:
    """One translucent bar per lane of the window ``win`` from each reset's failure to the end of the first
    step after (and a lighter one over the work redone before it), drawn under the spans, hovering the
    reset's cause."""
    if not len(rec) or not win.lanes:
        return
    bands = {"reset": ([], [], [], [], RESET_COLOUR), "work redone": ([], [], [], [], REDONE_COLOUR)}
    for r in rec.to_dict("records"):
        text = reset_text(r)
        end = r["first_step_end_ns"] if r["first_step_end_ns"] is not None else r["restored_ns"]
        spans = [("reset", r["failed_ns"], end)]
        if r["redone_ms"]:
            spans.append(("work redone", r["failed_ns"] - int(r["redone_ms"] * 1e6), r["failed_ns"]))
        for name, a, b in spans:
            if a is None or b is None or b <= win.t0_ns or a >= win.t1_ns:
                continue
            y, base, width, texts, _ = bands[name]
            for lane in win.lanes:
                y.append(lane)
                base.append((a - win.origin_ns) / 1e6)
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
