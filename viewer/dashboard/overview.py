"""The Overview page: the verdict, the headline's figures as cards, the findings (each with a link to its
evidence on the timeline), the step time per rank, the Kineto and elastic tables, and the run's facts."""
from __future__ import annotations

from dash import html

from viewer import units
from viewer.cli.tables import fact_rows
from viewer.dashboard import figures
from viewer.dashboard.components import analysis_table, card, empty, graph
from viewer.registry import NEEDS
from viewer.summary import run_facts

# the headline's figures as cards: its key, the card's id, title and unit (viewer.units); the first four
# show whether the run has them or not, the others when it has them
CARDS = (
    ("step_ms", "card-step", "step time", "ms"),
    ("exposed_comm_pct", "card-exposed", "exposed communication", "pct"),
    ("late_rank", "card-straggler", "late rank", "rank"),
    ("busbw_gbps", "card-busbw", "busbw", "gbps"),
    ("steps", "card-steps", "steps", "count"),
    ("ranks", "card-ranks", "ranks", "count"),
    ("duration_ms", "card-duration", "duration", "ms"),
    ("alpha_us", "card-alpha", "α (allreduce)", "us"),
    ("beta_gbps", "card-beta", "β (allreduce)", "gbps"),
    ("memcpy_pct", "card-memcpy", "memcpy share", "pct"),
)
TABLES = (("kineto_temporal", "ov-kineto"), ("kineto_overlap", "ov-kineto-overlap"), ("recoveries", "recoveries-table"))


def _detail(run, h: dict, key: str) -> str:
    """What a card's figure is, or why the run has none."""
    have = h[key] is not None
    if key == "step_ms":
        return "median over steps of the mean over ranks" if have else f"needs {NEEDS['steps']}"
    if key == "exposed_comm_pct":
        what = "NCCL kernels not overlapped by compute" if "runtime" not in run.has else "blocked in synchronize"
        return f"{what}, share of the step" if have else f"needs {NEEDS['steps']}" if not h["steps"] else (
            run.why_not("breakdown_steps") or "no step's communication measured")
    if key == "late_rank":
        if have:
            return f"on host {h['late_host']}" if h["late_host"] else "last to submit far more often than chance"
        return run.why_not("late_ranks") or "no rank was last far more often than chance"
    if key == "busbw_gbps":
        return (f"largest messages; {units.pct(h['busbw_pct'])} of the best seen" if have
                else run.why_not("op_bandwidth") or "no collective moved bytes across ranks")
    return {"ranks": f"{h['ranks_loaded']} with a trace" if h["ranks_loaded"] != h["ranks"] else "",
            "duration_ms": "first event to the last one's end", "steps": "with a measured span",
            "memcpy_pct": "of fused allreduce time", "alpha_us": "allreduce fit: time = α + bytes / β",
            "beta_gbps": "allreduce fit: time = α + bytes / β"}.get(key, "")


def _value(run, h: dict, key: str, unit: str) -> str:
    if h[key] is None:
        return "none" if key == "late_rank" and run.why_not("late_ranks") is None else units.MISSING
    return f"rank {h[key]}" if unit == "rank" else units.fmt(h[key], unit)


def cards(run) -> html.Div:
    h = run.headline()
    return html.Div([card(title, _value(run, h, key, unit), _detail(run, h, key), cid)
                     for i, (key, cid, title, unit) in enumerate(CARDS) if i < 4 or h[key] is not None],
                    className="cards")


def evidence_link(i: int, ev: dict):
    """A button that opens the timeline on a finding's evidence, or None."""
    if not (ev["ranks"] or ev["steps"] or ev["window_ns"]):
        return None
    parts = [f"rank {', '.join(map(str, ev['ranks']))}" if ev["ranks"] else "",
             f"step {', '.join(map(str, ev['steps']))}" if ev["steps"] else "",
             units.duration(ev["window_ns"][1] - ev["window_ns"][0]) if ev["window_ns"] else ""]
    return html.Button("show on the timeline: " + ", ".join(p for p in parts if p),
                       id={"type": "evidence", "index": i}, n_clicks=0, className="evidence")


def findings_list(run):
    found = run.findings()
    if not len(found):
        return empty("Nothing stands out in this run", "findings")
    return html.Ul([html.Li([html.Span(f.severity, className=f"sev {f.severity}"), html.B(f.title),
                             html.Div(f.message), evidence_link(i, f.evidence)], className="finding")
                    for i, f in enumerate(found.itertuples(index=False))], id="findings")


def body(held) -> list:
    run = held.run
    st = run.step_times()
    return [html.H2(run.headline()["verdict"], id="ov-verdict", className="verdict"), cards(run),
            html.H3("Findings"), findings_list(run),
            graph("ov-steps", figures.step_time_figure(st)) if len(st) else
            empty(f"Step time per rank: needs {NEEDS['steps']}", "ov-steps"),
            *(analysis_table(run, name, tid) for name, tid in TABLES if run.why_not(name) is None),
            html.H3("Run facts"),
            html.Table([html.Tbody([html.Tr([html.Th(k), html.Td(v)], className="warn" if warn else None)
                                    for k, v, warn in fact_rows(run_facts(run))])], className="facts",
                       id="run-facts")]
