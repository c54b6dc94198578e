"""The Overview page, answer first: the headline's verdict, the ranked findings as cards (each with links to its
evidence), the headline's figures, then the rank x step heatmap (step time, lateness, exposed communication) with the
outliers, the step time per rank, where the step went, the Kineto and elastic tables, and the run's facts."""
from __future__ import annotations

import dash_mantine_components as dmc
from dash import dcc, html

from viewer import units
from viewer.analyses.links import hosts_of
from viewer.cli.tables import fact_rows
from viewer.dashboard import figures, outliers
from viewer.dashboard.callbacks_url import href
from viewer.dashboard.components import analysis_table, card, empty, facts, graph
from viewer.dashboard.outliers import METRICS
from viewer.registry import NEEDS
from viewer.summary import run_facts

# the headline's figures as cards (and the Compare page's rows): its key, the card's id, title and unit
# (viewer.units); the first four show whether the run has them or not, the others when it has them
CARDS = (
    ("step_ms", "card-step", "step time", "ms"),
    ("exposed_comm_pct", "card-exposed", "exposed communication", "pct"),
    ("late_rank", "card-straggler", "late rank", "count"),
    ("busbw_gbps", "card-busbw", "busbw", "gbps"),
    ("steps", "card-steps", "steps", "count"),
    ("ranks", "card-ranks", "ranks", "count"),
    ("duration_ms", "card-duration", "duration", "ms"),
    ("alpha_us", "card-alpha", "α (allreduce)", "us"),
    ("beta_gbps", "card-beta", "β (allreduce)", "gbps"),
    ("memcpy_pct", "card-memcpy", "memcpy share", "pct"),
)
TABLES = (("kineto_temporal", "ov-kineto"), ("kineto_overlap", "ov-kineto-overlap"), ("recoveries", "recoveries-table"))
# severity: a colour and, beside it, a shape and the word
SEVERITY = {"high": ("red", "▲ high"), "medium": ("yellow", "◆ medium")}


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
    return f"rank {h[key]}" if key == "late_rank" else units.fmt(h[key], unit)


def cards(run) -> dmc.SimpleGrid:
    h = run.headline()
    return dmc.SimpleGrid([card(title, _value(run, h, key, unit), _detail(run, h, key), cid)
                           for i, (key, cid, title, unit) in enumerate(CARDS) if i < 4 or h[key] is not None],
                          cols=5, spacing="sm", my="md")


# the metrics whose evidence is where ranks were late at a step: a cell of the lateness heatmap
LATENESS_METRICS = ("wait_imposed_per_step_ns", "per_step_ns")


def evidence_links(held, ev: dict) -> list:
    """Links that open a finding's evidence: on the timeline (its window, else its first step) with its ranks; its
    ranks' cells at that step on the Negotiation page's heatmap; its n½ on the Communication page's bandwidth."""
    run, links = held.run, []
    ranks, steps = ev["ranks"], ev["steps"]
    if ranks or steps or ev["window_ns"]:
        parts = [f"rank {', '.join(map(str, ranks))}" if ranks else "", f"step {steps[0]}" if steps else "",
                 units.duration(ev["window_ns"][1] - ev["window_ns"][0]) if ev["window_ns"] else ""]
        to = href(held.id, "timeline", ranks=ranks, window=ev["window_ns"],
                  step=None if ev["window_ns"] or not steps else steps[0])
        links.append(dcc.Link("show evidence: " + ", ".join(p for p in parts if p), href=to,
                              className="evidence timeline"))
    if ranks and steps and ev["metric"] in LATENESS_METRICS and run.why_not("negotiations") is None:
        links.append(dcc.Link(f"on the heatmap: step {steps[0]}", href=href(held.id, "negotiation", steps[0], ranks),
                              className="evidence heatmap"))
    if ev["metric"] == "half_bw_bytes" and run.why_not("op_bandwidth") is None:
        links.append(dcc.Link(f"on the bandwidth chart: n½ {units.size(ev['value'])}",
                              href=href(held.id, "communication"), className="evidence bandwidth"))
    return links


def finding_card(held, f) -> dmc.Card:
    colour, label = SEVERITY.get(f.severity, ("gray", f"○ {f.severity}"))
    detail, _, fix = f.message.rpartition(": ")   # a finding's message ends in its fix
    ev = f.evidence
    impact = (f"{units.fmt(ev['value'], ev['unit'])} · {ev['metric'].removesuffix('_ns').replace('_', ' ')}"
              if ev["value"] is not None and ev["unit"] in units.UNITS and ev["metric"] else "")
    return dmc.Card([
        dmc.Group([dmc.Badge(label, color=colour, variant="light", className=f"sev {f.severity}"),
                   dmc.Text(f.title, fw=600, className="finding-title"),
                   dmc.Text(impact, size="sm", c="dimmed") if impact else None], gap="sm", wrap="nowrap"),
        dmc.Text(["Fix: ", fix], size="sm", mt=4) if fix else None,
        dmc.Group([*evidence_links(held, ev),
                   html.Details([html.Summary("detail"), dmc.Text(detail, size="sm")], className="detail")],
                  gap="lg", mt=4),
    ], withBorder=True, padding="sm", className="finding")


def findings_list(held):
    found = held.run.findings()
    if not len(found):
        return empty("Nothing stands out in this run", "findings")
    return dmc.Stack([finding_card(held, f) for f in found.itertuples(index=False)], gap="xs", id="findings")


def rank_steps(held, metric: str | None = None) -> list:
    """The rank x step heatmap of ``metric`` (default: the first the run has, lateness first), the choice of
    metric, and the outlier lists beside it; nothing when the run has no such matrix."""
    mats = held.matrices
    if not mats:
        return []
    metric = metric if metric in mats else next(iter(mats))
    return [dmc.SegmentedControl(id="ov-metric", value=metric, size="xs", mt="sm",
                                 data=[{"value": k, "label": METRICS[k][0]} for k in mats]),
            graph("ov-heatmap", figures.rank_step_heatmap(mats[metric], hosts_of(held.run.ranks), metric=metric)),
            outlier_lists(held, mats)]


def outlier_lists(held, mats: dict):
    """Per metric, the ranks with the highest mean over steps beside the ranks' median, each a link to its lane on
    the timeline, and one to all of them."""
    cols = []
    for metric, m in mats.items():
        top = outliers.ranked(m)
        if not len(top):
            continue
        label = METRICS[metric][0]
        rows = [dcc.Link(f"rank {int(r)}: {units.duration(v)}", href=href(held.id, "timeline", ranks=[int(r)]),
                         className="outlier") for r, v in zip(top["rank"], top["mean_ns"])]
        cols.append(dmc.Stack([
            dmc.Text(f"Highest {label} (mean a step; median rank {units.duration(top['median_ns'].iloc[0])})",
                     fw=600, size="sm"),
            *rows, dcc.Link("these on the timeline", href=href(held.id, "timeline", ranks=top["rank"].tolist()),
                            className="outliers-timeline")], gap=2, className=f"outliers {metric}"))
    return dmc.SimpleGrid(cols, cols=3, id="ov-outliers", mb="sm") if cols else None


def charts(held) -> list:
    """The rank x step heatmap and the outliers (a cell opens the timeline), then step time per rank and where the
    step went on each rank (past ``outliers.MANY_RANKS`` ranks: their spread, and the outliers')."""
    run = held.run
    st = run.step_times()
    by_rank = run.breakdown() if run.why_not("breakdown") is None else None
    phases = by_rank is not None and by_rank["other_ns"].notna().any()
    many = run.headline()["ranks"] > outliers.MANY_RANKS
    if phases and many:
        by_rank = by_rank[by_rank["rank"].isin(held.outliers)]
    why = run.why_not("breakdown") or "no rank has a complete step"
    return [*rank_steps(held), dmc.SimpleGrid([
        graph("ov-steps", figures.step_time_figure(st, run.headline()["late_rank"], held.outliers)) if len(st) else
        empty(f"Step time per rank: needs {NEEDS['steps']}", "ov-steps"),
        graph("ov-breakdown", figures.breakdown_bars(by_rank, run.headline()["ranks"] if many else None)) if phases
        else empty(f"Where the step went: {why}", "ov-breakdown"),
    ], cols=2)]


def body(held) -> list:
    """The verdict, findings and cards at once; the charts follow (callbacks_pages draws them into ov-charts)."""
    run = held.run
    return [dmc.Title(run.headline()["verdict"], order=2, id="ov-verdict", className="verdict", my="sm"),
            findings_list(held), cards(run), dcc.Store(id="ov-charts-run", data=held.id),
            dcc.Loading(html.Div(id="ov-charts"), type="dot"),
            *(analysis_table(run, name, tid) for name, tid in TABLES if run.why_not(name) is None),
            dmc.Title("Run facts", order=4, mt="md", mb="xs"),
            facts(fact_rows(run_facts(run)), "run-facts")]
