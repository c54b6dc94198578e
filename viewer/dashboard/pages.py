"""The analysis pages (Breakdown, Negotiation, Fusion, Communication, Compare, What if): each shows the run's
analyses as figures and their declared tables, and says in words why one the run cannot have is missing."""
from __future__ import annotations

import weakref

import dash_mantine_components as dmc
import pandas as pd
from dash import html

from viewer import units
from viewer.analyses.links import hosts_of
from viewer.dashboard import figures
from viewer.dashboard.compare import head as compare_head
from viewer.dashboard.components import analysis_table, card, empty, graph, table, unavailable
from viewer.dashboard.layout import PAGES
from viewer.dashboard.overview import CARDS
from viewer.registry import NEEDS, Column, Table
from viewer.summary import run_facts
from viewer.whatif import ModelError, Settings, fit, predict

# the analyses each page shows: a page applies to a run that can have one of them (Run.why_not, from what the
# registry declares each needs); the others apply to every run
SHOWS = {"breakdown": ("breakdown", "kineto_steps"), "negotiation": ("negotiations",), "fusion": ("fusion",),
         "communication": ("op_bandwidth", "links", "cross_link", "kineto_collectives_summary")}


def applicable(run) -> list[str]:
    """The pages that apply to ``run``."""
    return [p for p, _ in PAGES if p not in SHOWS or any(run.why_not(n) is None for n in SHOWS[p])]


def _tables(run, named) -> list:
    """The declared tables of the analyses ``named`` ((name, table id, index)) the run has."""
    return [analysis_table(run, name, tid, i) for name, tid, i in named if run.why_not(name) is None]


def breakdown(held) -> list:
    run = held.run
    kineto = _tables(run, [("kineto_steps", "bd-kineto-table", 0)])
    if why := unavailable(run, "breakdown", "The breakdown of each step into phases"):
        return [why, *kineto]
    by_rank = run.breakdown()
    if not by_rank["other_ns"].notna().any():
        return [empty("The breakdown of each step into phases: no rank has a complete step", "bd-rank-table")]
    return [graph("bd-bars", figures.breakdown_bars(by_rank)),
            dmc.Title("Why the late ranks are late", order=4, mt="md"),
            root_causes(run), *_tables(run, [("breakdown", "bd-rank-table", 0), ("breakdown", "bd-comm-table", 1)]),
            *kineto]


def root_causes(run):
    """Each late rank's cause (and a phase far off on another rank), in words."""
    if why := unavailable(run, "root_cause", "Why a rank is late", "bd-rootcause"):
        return why
    causes = run.root_cause()
    if not len(causes):
        return empty("No rank is late enough to need a cause", "bd-rootcause")
    return html.Ul([html.Li([html.B(f"rank {int(r.rank)} (late): ") if r.late else None, r.message],
                            className="finding") for r in causes.itertuples(index=False)], id="bd-rootcause")


def negotiation(held, step=None, ranks=None) -> list:
    """The lateness heatmap (the view's ``step`` on its pinned ``ranks`` outlined: a finding's evidence), who was
    last, and the waits."""
    run = held.run
    if why := unavailable(run, "negotiations", "Negotiation"):
        return [why]
    if not len(run.negotiations()):
        return [empty("Negotiation: no tensor was negotiated by every rank")]
    hosts = hosts_of(run.ranks)
    return [graph("neg-heatmap", figures.rank_step_heatmap(run.lateness(), hosts, step, ranks or ())),
            graph("neg-last", figures.times_last_bar(run.stragglers(), hosts)),
            *_tables(run, [("stragglers", "neg-stragglers-table", 0), ("tensor_waits", "neg-wait-table", 0)])]


def allreduces(run):
    """The fused allreduces of the lowest rank, as ``run.fusion()`` summarizes them (None: the run has none)."""
    if run.why_not("fusion_ops"):
        return None
    ops = run.fusion_ops()
    ops = ops[ops["op"] == "ALLREDUCE"]
    return ops[ops["rank"] == ops["rank"].min()] if len(ops) else None


def fusion(held) -> list:
    run = held.run
    if why := unavailable(run, "fusion", "Fusion"):
        return [why]
    ops = allreduces(run)
    if ops is None:
        return [empty("Fusion: no allreduce in this run (broadcasts and the like are never fused)")]
    thr = run.fusion()["threshold"].iloc[0]
    return [html.Div(analysis_table(run, "fusion", "fus-facts-table"), id="fus-facts"),
            dmc.SimpleGrid([graph("fus-fill", figures.fill_histogram(ops, thr)) if ops["fill_ratio"].notna().any()
                            else empty("Fill ratio: no fusion threshold recorded", "fus-fill"),
                            graph("fus-count", figures.count_histogram(ops, thr))], cols=2),
            graph("fus-memcpy", figures.memcpy_share_histogram(ops))]


def communication(held, peak=None) -> list:
    run = held.run
    more = _tables(run, [("links", "comm-links-table", 0), ("cross_link", "comm-cross-table", 0),
                         ("kineto_collectives_summary", "comm-kineto-table", 0)])
    if why := unavailable(run, "op_bandwidth", "Bandwidth and the α-β fit"):
        return [why, *more]
    bw, ab = run.op_bandwidth(peak), run.alpha_beta()
    best = float(bw["busbw_gbps"].max()) if len(bw) else None
    return [graph("comm-busbw", figures.busbw_figure(bw, ab[ab["credible"]], peak or best, bool(peak))),
            analysis_table(run, "alpha_beta", "comm-fit-table"),
            analysis_table(run, "bandwidth", "comm-nccl-table", peak_busbw_gbps=peak), *more]


_SETTINGS = (("backend", "backend", "text"), ("fusion_threshold", "fusion threshold", "bytes"),
             ("cycle_time_ms", "cycle time", "ms"))


def _change(a, b) -> str:
    if a in (None, 0) or b is None or isinstance(a, str):
        return "changed" if a != b else ""
    p = 100.0 * (b - a) / abs(a)
    return ("+" if p > 0 else "") + units.pct(p)


def compare(a, b) -> list:
    """``ringscope diff``'s head (verdict, phase waterfall, movers, settings, timeline links), then run A's and
    run B's headlines and settings side by side, and their stragglers, fusion and bandwidth."""
    ha, hb = a.run.headline(), b.run.headline()
    fa, fb = run_facts(a.run), run_facts(b.run)
    rows = [(label, units.fmt(ha[k], unit), units.fmt(hb[k], unit), _change(ha[k], hb[k]))
            for k, _, label, unit in CARDS if ha[k] is not None or hb[k] is not None]
    rows += [(label, units.fmt(fa[k], unit), units.fmt(fb[k], unit), "changed" if fa[k] != fb[k] else "")
             for k, label, unit in _SETTINGS]
    spec = Table(f"{a.label} vs {b.label}", (Column("what", "what"), Column("a", f"A: {a.label}"),
                                             Column("b", f"B: {b.label}"), Column("change", "change")))
    out = [*compare_head(a, b), table(spec, pd.DataFrame(rows, columns=["what", "a", "b", "change"]), "cmp-table")]
    for name, gid, title, fig in (("stragglers", "cmp-stragglers", "Stragglers", figures.straggler_compare),
                                  ("fusion_ops", "cmp-fusion", "Fusion", figures.fusion_compare),
                                  ("op_bandwidth", "cmp-bandwidth", "Bandwidth", figures.bandwidth_compare)):
        both = [(h.label, allreduces(h.run) if name == "fusion_ops" else h.run.get(name)
                 if h.run.why_not(name) is None else None) for h in (a, b)]
        if all(d is None or not len(d) for _, d in both):
            out.append(empty(f"{title}: neither run has any; run A {a.run.why_not(name) or 'has none'}", gid))
        else:
            out.append(graph(gid, fig(both)))
    return out


FITS = Table("The replay's response cost: fixed + per MiB (memcpy included), x(1 + κ x busy), fitted on "
             "each op's busy time", (
    Column("backend", "backend"), Column("op", "op"), Column("n", "ops", "count"), Column("fixed_us", "fixed", "us"),
    Column("us_per_mib", "per MiB", "us"), Column("contention", "κ", "num"),
    Column("median_err_pct", "median error", "pct"), Column("worst_err_pct", "worst error", "pct")))
_MODELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # run -> its fitted model, or why none


def _model(run):
    """The fitted what-if model of a run, or the reason there is none."""
    if run not in _MODELS:
        try:
            _MODELS[run] = fit(run)
        except ModelError as exc:
            _MODELS[run] = str(exc)
    return _MODELS[run]


def settings_of(threshold_mb, cycle_ms, bandwidth, latency, ranks, flags):
    """The what-if's settings from its knobs (an emptied knob: the run's own)."""
    return Settings(None if threshold_mb in (None, "") else int(float(threshold_mb) * (1 << 20)),
                    None if cycle_ms in (None, "") else float(cycle_ms), "no_straggler" in (flags or []),
                    float(bandwidth or 1), float(latency or 1), int(ranks) if ranks else None)


def summary(run, res):
    step = run.headline()["step_ms"]
    change = 100 * (res["predicted_step_ms"] / res["baseline_step_ms"] - 1)
    return dmc.SimpleGrid([
        card("measured step", units.fmt(step, "ms"), "the run's step time (median over steps)" if step is not None
             else f"needs {NEEDS['steps']}", "wi-measured"),
        card("replayed", units.fmt(res["baseline_step_ms"], "ms"),
             f"the run's settings, median over replayed steps; worst step off "
             f"{units.pct(res['baseline_error_pct'])}", "wi-baseline"),
        card("predicted step", units.fmt(res["predicted_step_ms"], "ms"),
             f"{'+' if change > 0 else ''}{units.pct(change)} vs replayed"
             + (" (extrapolated: ring cost model)" if res["extrapolated"] else ""), "wi-predicted"),
    ], cols=3, spacing="sm", my="sm")


def whatif(held, *knobs) -> list:
    """The prediction for the page's knobs (the model is fitted once per run, kept while the run is held)."""
    model = _model(held.run)
    if isinstance(model, str):
        return [empty(f"Nothing to replay in this run: {model}", "wi-none")]
    res = predict(model, settings_of(*knobs))
    return [summary(held.run, res), graph("wi-steps", figures.whatif_steps(res["steps"])),
            graph("wi-timeline", figures.whatif_timeline(res["timeline"])),
            table(FITS, pd.DataFrame(res["fits"]), "wi-fit-table")]
