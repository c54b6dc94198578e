"""Rich tables for ``ringscope summarize`` (terminal output only; the data comes from viewer.summary)."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from viewer.errors import describe_skipped
from viewer.units import fmt_bytes, fmt_ns


def _ns(v):
    return "–" if v is None else fmt_ns(v)


def _num(v, fmt="{:.2f}"):
    return "–" if v is None else fmt.format(v)


def print_summary(data: dict, tables: dict, top: int = 10, console=None) -> None:
    """Print run facts, top findings, stragglers, fusion, bandwidth by message size and hangs."""
    con = console or Console()
    run = data["run"]
    facts = Table(title="Run", show_header=False, title_justify="left")
    facts.add_column(style="bold")
    facts.add_column()
    files = run["files"]
    facts.add_row("source", f"{files[0]}" + (f" (+{len(files) - 1} more)" if len(files) > 1 else ""))
    facts.add_row("format", str(run["format"]))
    facts.add_row("ranks", f"{run['size']} (traces for {len(run['ranks_loaded'])})")
    if len(run.get("hosts") or {}) > 1:
        facts.add_row("hosts", "; ".join(f"{h}: ranks {', '.join(map(str, rs))}" for h, rs in run["hosts"].items()))
    facts.add_row("backend", str(run["backend"] or "–"))
    facts.add_row("duration", _ns(run["duration_ns"]))
    facts.add_row("steps", str(run["steps"] or "– (no step marks)"))
    facts.add_row("events / tensor ops / fused ops", f"{run['events']} / {run['tensor_ops']} / {run['fused_ops']}")
    if run["fusion_threshold"]:
        facts.add_row("fusion threshold", fmt_bytes(run["fusion_threshold"]))
    for g in run.get("generations") or []:
        facts.add_row(f"generation {g['generation']}", f"{g['size']} rank(s) from step {g['step_base']}, "
                      f"{_ns(g['start_ns'])} to {_ns(g['end_ns'])}, ended: {g['end'] or '?'}")
    if run["truncated_ranks"]:
        facts.add_row("truncated traces", ", ".join(map(str, run["truncated_ranks"])), style="yellow")
    if run["skipped"]:
        for f in dict.fromkeys(s["file"] for s in run["skipped"]):
            facts.add_row("damaged lines skipped", f"{f}: " + describe_skipped(
                [s for s in run["skipped"] if s["file"] == f]), style="yellow")
    con.print(facts)

    fnd = Table(title="Findings", title_justify="left")
    fnd.add_column("#", justify="right")
    fnd.add_column("severity")
    fnd.add_column("finding", overflow="fold")
    for i, f in enumerate(data["findings"], 1):
        style = {"high": "red", "medium": "yellow"}.get(f["severity"], "")
        fnd.add_row(str(i), f["severity"], f["message"], style=style)
    if not data["findings"]:
        fnd.add_row("", "", "nothing stands out")
    con.print(fnd)

    hosted = len(run.get("hosts") or {}) > 1
    st = Table(title="Stragglers (who was last to submit)", title_justify="left")
    for c in ("rank", *(("host",) if hosted else ()), "negotiations", "last", "% last", "wait imposed", "per step",
              "median lateness"):
        st.add_column(c, justify="right")
    for r in data["stragglers"]:
        st.add_row(str(r["rank"]), *((str(r.get("host") or "–"),) if hosted else ()), str(r["negotiations"]),
                   str(r["times_last"]), f"{r['pct_last']:.0f}",
                   _ns(r["wait_imposed_ns"]), _ns(r["wait_imposed_per_step_ns"]) if r["steps"] else "–",
                   _ns(r["median_lateness_ns"]))
    if data["stragglers"]:
        con.print(st)

    fu = data["fusion"]
    if fu:
        t = Table(title="Fusion", show_header=False, title_justify="left")
        t.add_column(style="bold")
        t.add_column()
        t.add_row("fused ops / tensors", f"{fu['ops']} / {fu['tensors']} ({_num(fu['mean_tensors_per_op'])} per op)")
        t.add_row("single-tensor ops", f"{_num(fu['single_tensor_pct'], '{:.0f}')} %")
        t.add_row("median op size", fmt_bytes(fu["median_bytes"] or 0))
        if fu["threshold"]:
            t.add_row("median fill of threshold", f"{_num((fu['median_fill'] or 0) * 100, '{:.1f}')} %")
            t.add_row("ops ≥ 90 % full", f"{_num(fu['full_pct'], '{:.0f}')} %")
        t.add_row("memcpy share of op time", f"{_num(fu['memcpy_share'] * 100, '{:.1f}')} %")
        con.print(t)

    bw = Table(title="Bandwidth by message size (nccl-tests conventions, GB/s)", title_justify="left")
    for c in ("size", "op", "ops", "time µs", "algbw", "busbw", "busbw max", "efficiency"):
        bw.add_column(c, justify="right")
    for r in data["bandwidth"][-top:]:
        bw.add_row(fmt_bytes(r["size_bytes"]), r["op"], str(r["ops"]), _num(r["time_us"], "{:.1f}"),
                   _num(r["algbw_gbps"]), _num(r["busbw_gbps"]), _num(r["busbw_max_gbps"]),
                   _num(None if r["efficiency"] is None else 100 * r["efficiency"], "{:.0f} %"))
    if data["bandwidth"]:
        con.print(bw)

    _print_links(con, data.get("links") or [], data.get("cross_link") or [])
    _print_recoveries(con, data.get("recoveries") or [])
    _print_breakdown(con, data["breakdown"][:top])
    _print_root_causes(con, data["root_cause"])

    if data["hangs_by_rank"]:
        h = Table(title="Never completed (by missing rank)", title_justify="left")
        for c in ("rank", "tensors", "first step", "names"):
            h.add_column(c)
        for r in data["hangs_by_rank"]:
            h.add_row(str(r["rank"]), str(r["tensors"]), str(r["first_step"]), ", ".join(r["names"][:3]))
        con.print(h)


def _print_links(con, rows, cost) -> None:
    if not rows:
        return
    t = Table(title="Links: intra-host and cross-host traffic by op size (busbw in Gbit/s; a flat ring's hops "
                    "all run at its slowest link's pace)", title_justify="left")
    for c in ("size", "link", "phase", "ops", "traffic", "time µs", "busbw", "busbw max"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(fmt_bytes(r["size_bytes"]), r["link"], r["phase"], str(r["ops"]), fmt_bytes(r["traffic_bytes"]),
                  _num(r["time_us"], "{:.1f}"), _num(None if r["busbw_gbps"] is None else 8 * r["busbw_gbps"]),
                  _num(None if r["busbw_max_gbps"] is None else 8 * r["busbw_max_gbps"]))
    con.print(t)
    if cost:
        c = Table(title="What the cross-host link cost, mean per step", title_justify="left")
        for col in ("rank", "host", "step", "link busy", "of which waited on", "share"):
            c.add_column(col, justify="right")
        for r in cost:
            c.add_row(str(r["rank"]), str(r["host"]), _ns(r["step_ns"]), _ns(r["cross_ns"]),
                      _ns(r["exposed_cross_ns"]), f"{r['share_pct']:.0f} %")
        con.print(c)


def _ms(v) -> str:
    return "–" if v is None else f"{v / 1e6:.1f}"


_PHASE_COLS = (("data wait", "data_wait_ns"), ("forward", "forward_ns"), ("backward", "backward_ns"),
               ("optimizer", "optimizer_ns"), ("exposed comm", "exposed_comm_ns"), ("other", "other_ns"))


def _phase_cells(r) -> list[str]:
    if r["other_ns"] is None:
        return ["–"] * len(_PHASE_COLS)
    if not r["phases_known"]:   # the four phases unknown: never guessed
        return ["?"] * 4 + [_ms(r["exposed_comm_ns"]), _ms(r["other_ns"])]
    return [_ms(r[k]) for _, k in _PHASE_COLS]


def _print_breakdown(con, rows) -> None:
    if not rows:
        return
    ph = Table(title="Where the step went, mean per rank (ms; adds up to the step; ? = phases unknown: no "
                     "phase spans on that rank)", title_justify="left")
    for c in ("rank", "steps", "step", *(c for c, _ in _PHASE_COLS)):
        ph.add_column(c, justify="right")
    for r in rows:
        ph.add_row(str(r["rank"]), str(r["step"]), _ms(r["step_ns"]), *_phase_cells(r))
    con.print(ph)
    bd = Table(title="Communication per step, mean per rank (ms; wait = blocked in synchronize, "
                     "exp = exposed comm in flight, ovl = overlapped)", title_justify="left")
    for c in ("rank", "step", "wait", "neg", "queue", "copy", "comm", "exp", "ovl", "exp%"):
        bd.add_column(c, justify="right")
    for r in rows:
        bd.add_row(str(r["rank"]), _ms(r["step_ns"]), _ms(r["framework_wait_ns"]), _ms(r["negotiation_ns"]),
                   _ms(r["queue_ns"]), _ms(r["memcpy_ns"]), _ms(r["comm_ns"]), _ms(r["exposed_ns"]),
                   _ms(r["overlapped_ns"]), f"{r['exposed_pct']:.0f}")
    con.print(bd)


def _print_recoveries(con, rows) -> None:
    if not rows:
        return
    t = Table(title="Recoveries (elastic resets, ms; lost = failure -> end of the first step after, redone = "
                    "last commit -> failure)", title_justify="left")
    for c in ("#", "kind", "size", "detect", "re-form", "restore", "1st step", "lost", "redone", "% job"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(str(r["reset"]), r["kind"], f"{r['size_before']}→{r['size_after']}",
                  *(_num(r[c], "{:.1f}") for c in ("detect_ms", "reform_ms", "restore_ms", "first_step_ms",
                                                    "lost_ms", "redone_ms", "share_pct")))
    con.print(t)
    for r in rows:
        missing = r["ranks_missing_slice"]
        con.print(f"  #{r['reset']}: {r['cause']}; biggest part: {r['biggest'] or '–'}"
                  + (f"; [yellow]no ELASTIC_RESET slice on rank(s) {', '.join(map(str, missing))}[/yellow]"
                     if missing else ""), highlight=False)


def _print_root_causes(con, rows) -> None:
    if not rows:
        return
    t = Table(title="Why the late ranks are late, and phases far off on the others (excess per step over the "
                    "others' median)", title_justify="left")
    for c in ("rank", "% last", "lateness", "cause", "excess", "share", "counters that differ"):
        t.add_column(c, justify="right" if c not in ("cause", "counters that differ") else "left",
                     overflow="fold")
    for r in rows:
        counters = ", ".join(f"{c['counter']} {c['rank_value']:.3g} vs {c['others_value']:.3g}"
                             for c in r["counters"] or []) or "–"
        named = r["cause"] not in ("unknown", "unexplained")
        share = f"{r['share_pct']:.0f} % of " + ("lateness" if r["late"] else "step")
        t.add_row(str(r["rank"]), f"{r['pct_last']:.0f}", _ns(r["lateness_ns"]) if r["late"] else "not late",
                  r["explained_by"] if named else r["cause"], _ns(r["excess_ns"]) if named else "–",
                  share if named else "–", counters)
    con.print(t)


def print_step_breakdown(rows, console=None) -> None:
    """Every rank's every step: where it went (``ringscope summarize --breakdown``)."""
    con = console or Console()
    t = Table(title="Where each step went, per rank (ms; ? = phases unknown)", title_justify="left")
    for c in ("rank", "step", "step ms", *(c for c, _ in _PHASE_COLS)):
        t.add_column(c, justify="right")
    for r in rows:
        if r["step"] >= 0:
            t.add_row(str(r["rank"]), str(r["step"]), _ms(r["step_ns"]), *_phase_cells(r))
    con.print(t)
