"""Dashboard group: time to first view of a 1M-event run in headless Chromium, and bytes sent; the timeline
of a 64-rank run drawn in-process; the first view and the rank x step heatmap of a run of many ranks (issue 43).

The first-view measurement is the dashboard engineer's ``bench/dashboard_first_view.py`` (a real
server, a real headless Chromium through playwright, a synthetic 1M-event run built as tables);
this module runs it in a subprocess (``--json``) ``reps`` times and takes medians.
"""
from __future__ import annotations

import json
from pathlib import Path

from bench import stats
from bench.launch import BenchError, run_text

SCRIPT = Path(__file__).resolve().parent / "dashboard_first_view.py"
SAMPLE = Path(__file__).resolve().parents[1] / "sample_traces" / "straggler"
EVENTS = 1_000_000
TIMELINE_RANKS = 64
MANY_EVENTS_PER_RANK = 2_000


def timeline_draw(events_per_rank: int, reps: int) -> dict:
    """The timeline of a ``TIMELINE_RANKS``-rank run (the straggler sample replicated by tracegen), in this
    process: its index built once (as the server does before the first view), then each draw of the whole run
    (the window, the figure, its JSON) as the callback makes it; seconds, the draw's median."""
    import gzip
    import tempfile
    import time

    import plotly.io as pio

    from bench import tracegen
    from viewer import Run
    from viewer.dashboard.callbacks_timeline import figure
    from viewer.dashboard.registry import Registry

    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "src"
        src.mkdir()
        for f in sorted(SAMPLE.glob("rank-*.json.gz")):
            (src / f.name[:-3]).write_bytes(gzip.decompress(f.read_bytes()))
        tracegen.build(src, Path(d) / "run", TIMELINE_RANKS, events_per_rank)
        held = Registry().add(Run.load(Path(d) / "run", cache=False), "64 ranks")
    held.run.headline()
    t = time.perf_counter()
    _ = held.timeline
    index_s = time.perf_counter() - t
    draws, payload = [], b""
    for _ in range(reps):
        t = time.perf_counter()
        fig = figure(held)
        payload = pio.to_json(fig)
        draws.append(time.perf_counter() - t)
    return {"events": len(held.run.events), "lanes": len(fig.layout.yaxis.categoryarray), "index_s": index_s,
            "draw_s": stats.median(draws), "bytes": len(payload)}


def many_ranks(quick: bool, rows: list, metrics: dict, notes: list, raw: dict) -> None:
    """Issue 43's views at scale: the first view of a run of ``RINGSCOPE_BENCH_DASH_RANKS`` ranks (default 256,
    quick 64; 1024 is the target's) of ``MANY_EVENTS_PER_RANK`` events each, once."""
    import os
    ranks = int(os.environ.get("RINGSCOPE_BENCH_DASH_RANKS", 64 if quick else 256))
    try:
        r = raw["many_ranks"] = _measure(ranks * MANY_EVENTS_PER_RANK, ranks)
    except BenchError as exc:
        notes.append(f"{ranks} ranks: {exc}")
        return
    for key, label, unit in (
            ("server_up_s", "server up (build and load the run, not part of the view)", "s"),
            ("overview_s", "first view: navigation -> overview cards", "s"),
            ("heatmap_after_overview_s", "rank x step heatmap drawn, after the cards", "s"),
            ("timeline_first_view_s", "timeline tab -> bars drawn", "s"),
            ("timeline_lanes", "timeline lanes it opens with", "lanes"),
            ("top_outlier", f"first outlier listed (planted straggler: rank {r['planted']})", "rank")):
        rows.append({"measure": f"{ranks} ranks: {label}", "value": r[key], "unit": unit})
    detail = f"{ranks} ranks x {MANY_EVENTS_PER_RANK:,} events, once"
    metrics[f"dashboard.first_view_s.ranks_{ranks}"] = {"value": r["overview_s"], "detail": detail}
    metrics[f"dashboard.heatmap_after_first_view_s.ranks_{ranks}"] = {"value": r["heatmap_after_overview_s"],
                                                                     "detail": detail}
    notes.append(f"{ranks} ranks: sample_traces/healthy replicated by bench/tracegen, {MANY_EVENTS_PER_RANK:,} events "
                 "a rank (a few steps: the views' cost grows with ranks x steps, the load's with events, which the "
                 "analyzer group measures); the planted straggler "
                 + ("is" if r["top_outlier"] == r["planted"] else "is NOT") + " the first outlier listed")


def _measure(events: int = EVENTS, ranks: int = 4) -> dict:
    import sys
    out = run_text([sys.executable, str(SCRIPT), "--json", "--events", str(events), "--ranks", str(ranks)],
                   timeout=400 + 2 * ranks, label="dashboard_first_view.py")
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        raise BenchError(f"dashboard_first_view.py printed no JSON\n{out[-2000:]}")
    return json.loads(lines[-1])


def run(quick: bool) -> dict:
    rows, metrics, notes, raw = [], {}, [], {"runs": []}
    cols = ["measure", "value", "unit"]
    tl = raw["timeline_64"] = timeline_draw(2_000 if quick else 10_000, 3 if quick else 5)
    rows += [{"measure": f"timeline of {TIMELINE_RANKS} ranks: index (once, before the first view)",
              "value": tl["index_s"], "unit": "s"},
             {"measure": f"timeline of {TIMELINE_RANKS} ranks: whole run drawn (window, figure, JSON)",
              "value": tl["draw_s"], "unit": "s"},
             {"measure": f"timeline of {TIMELINE_RANKS} ranks: lanes", "value": tl["lanes"], "unit": "lanes"}]
    metrics["dashboard.timeline_64_ranks_draw_s"] = {
        "value": tl["draw_s"], "detail": f"{tl['events']:,} events, {tl['lanes']} lanes, {tl['bytes']:,} B of JSON"}
    if not SCRIPT.exists():
        notes.append("bench/dashboard_first_view.py is not there: not measured")
        return {"rows": rows, "metrics": metrics, "notes": notes, "raw": raw, "columns": cols}
    try:
        for _ in range(1 if quick else 3):
            raw["runs"].append(_measure())
    except BenchError as exc:
        notes.append(str(exc))
    many_ranks(quick, rows, metrics, notes, raw)
    runs = raw["runs"]
    if not runs:
        return {"rows": rows, "metrics": metrics, "notes": notes, "raw": raw, "columns": cols}
    med = {k: stats.median([r[k] for r in runs]) for k in
           ("server_up_s", "overview_s", "heatmap_after_overview_s", "timeline_first_view_s", "zoom_redraw_s",
            "timeline_callback_bytes", "total_bytes", "timeline_bars")}
    for key, label, unit in (
            ("server_up_s", "server up (build tables, not part of the view)", "s"),
            ("overview_s", "first view: navigation -> overview cards", "s"),
            ("heatmap_after_overview_s", "rank x step heatmap drawn, after the cards", "s"),
            ("timeline_first_view_s", "first view: timeline tab -> bars drawn", "s"),
            ("zoom_redraw_s", "zoomed timeline redraw", "s"),
            ("timeline_bars", "timeline bars drawn", "bars"),
            ("timeline_callback_bytes", "bytes sent for the timeline", "B"),
            ("total_bytes", "bytes sent in total (page, assets, callbacks)", "B")):
        rows.append({"measure": label, "value": med[key], "unit": unit})
    metrics["dashboard.first_view_s.overview"] = {
        "value": med["overview_s"], "detail": f"{EVENTS:,}-event run, median of {len(runs)}"}
    metrics["dashboard.first_view_s.timeline"] = {
        "value": med["timeline_first_view_s"],
        "detail": f"incl. the server's first timeline index; {med['timeline_callback_bytes']:,.0f} "
                  f"B for {med['timeline_bars']:,.0f} bars"}
    metrics["dashboard.bytes_sent"] = {"value": med["total_bytes"], "detail": "no target (information)"}
    notes.append("the run is sample_traces/straggler replicated to 1M events (bench/tracegen), loaded "
                 "before the server comes up: loading is not included (see the analyzer group)")
    return {"rows": rows, "metrics": metrics, "notes": notes, "raw": raw, "columns": cols}
