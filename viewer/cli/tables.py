"""``ringscope summarize``'s terminal output: the answer and its evidence, or with ``--full`` every table."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from viewer import registry, units
from viewer.errors import describe_skipped
from viewer.summary import rows_of

SEVERITY_STYLE = {"high": "red", "medium": "yellow"}
# the analysis whose table holds a finding's evidence; a run with no finding shows where its steps went
EVIDENCE = {"straggler": "stragglers", "late_host": "late_hosts", "phase_imbalance": "root_cause",
            "rank_died": "hangs_by_rank", "hang": "hangs", "truncated": "hangs_by_rank",
            "fusion_threshold": "fusion", "fusion_starved": "fusion", "memcpy": "fusion", "exposed": "breakdown",
            "priority": "priority_waits", "alpha_beta": "alpha_beta", "bandwidth": "bandwidth",
            "slow_link": "links", "recoveries": "recoveries", "gpu_idle": "kineto_launch_stats",
            "launch_overhead": "kineto_launch_stats", "low_overlap": "kineto_overlap",
            "bucket_cap_small": "ddp_buckets", "reduction_exposed": "ddp_buckets"}
AT_REST = ("breakdown", "kineto_temporal", "kineto_collectives_summary", "bandwidth")


def print_summary(run, data: dict, top: int = 10, console=None, full: bool = False) -> None:
    """The verdict, the headline, the findings and their evidence table; ``full``: everything."""
    con = console or Console()
    h = data["headline"]
    con.print(f"[bold]{h['verdict']}[/bold]", highlight=False)
    con.print(headline_line(h), highlight=False)
    if not full:
        findings_list(con, data["findings"])
        print_analyses(run, [n for n in [evidence_of(run, data["findings"])] if n], top, con)
        con.print("[dim]ringscope summarize --full: the run's facts, each finding's detail and fix, every table"
                  "[/dim]", highlight=False)
        return
    con.print(facts_table(data["run"]))
    findings_table(con, data["findings"])
    print_analyses(run, [a.name for a in registry.ANALYSES.values() if a.json], top, con)
    missing = {k: v for k, v in data["unavailable"].items() if registry.ANALYSES[k].tables}
    if missing:
        con.print("[dim]not shown: " + "; ".join(f"{k} ({v})" for k, v in missing.items()) + "[/dim]",
                  highlight=False)


def evidence_of(run, findings: list[dict]) -> str | None:
    """The analysis whose table shows the top finding, else where the steps went (the first with rows)."""
    names = [EVIDENCE.get(f["kind"]) for f in findings if f["severity"] != "info"] + list(AT_REST)
    if findings and findings[0]["kind"] == "straggler" and run.why_not("stragglers") is not None:
        names.insert(0, "kineto_rank_stragglers")
    for n in names:
        a = registry.ANALYSES.get(n) if n else None
        if a and a.tables and run.why_not(n) is None:
            rows = rows_of(run, a)
            if rows is not None and len(rows):
                return n
    return None


def findings_list(con, rows: list[dict]) -> None:
    """One line a finding: its severity and its title (the detail is ``--full``'s)."""
    for i, f in enumerate(rows, 1):
        style = SEVERITY_STYLE.get(f["severity"], "dim")
        con.print(f"{i}. [{style}]{f['severity']}[/{style}] {f['title']}", highlight=False)


def print_analyses(run, names, top: int | None = 10, console=None) -> None:
    """The declared tables of the analyses ``names`` the run has, ``top`` rows each (None: all)."""
    con = console or Console()
    for name in names:
        a = registry.ANALYSES[name]
        if a.tables and run.why_not(name) is None:
            df = rows_of(run, a)
            for t in a.tables:
                print_table(con, t, df, len(df) if top is None else top)


def headline_line(h: dict) -> str:
    """The headline's figures on one line, those the run has."""
    parts = [("step", units.duration(None if h["step_ms"] is None else h["step_ms"] * 1e6)),
             ("steps", h["steps"] or None), ("ranks", h["ranks"]),
             ("exposed communication", units.pct(h["exposed_comm_pct"])),
             ("late rank", h["late_rank"]), ("late host", h["late_host"]),
             ("α", units.fmt(h["alpha_us"], "us")), ("β", units.rate(h["beta_gbps"])),
             ("memcpy", units.pct(h["memcpy_pct"])), ("busbw", units.rate(h["busbw_gbps"]))]
    return "  ".join(f"{k} {v}" for k, v in parts if v not in (None, units.MISSING))


def print_table(con, spec: registry.Table, df, top: int) -> None:
    """One declared table: its columns that hold a value, ``top`` rows (a one-row table as pairs)."""
    if df is None or not len(df):
        return
    df = spec.derive(df) if spec.derive else df
    cols = shown_columns(spec, df)
    shown = df.tail(top) if spec.last else df.head(top)
    if len(df) == 1:
        t = Table(title=spec.title, show_header=False, title_justify="left")
        t.add_column(style="bold")
        t.add_column()
        for c in cols:
            t.add_row(c.label, cell(df[c.key].iloc[0], c))
    else:
        more = f" ({len(shown)} of {len(df)}: --top N, --csv DIR)" if len(shown) < len(df) else ""
        t = Table(title=spec.title + more, title_justify="left")
        for c in cols:
            t.add_column(c.label, justify="left" if c.unit == "text" else "right", overflow="fold")
        for row in shown[[c.key for c in cols]].itertuples(index=False):
            t.add_row(*(cell(v, c) for c, v in zip(cols, row)))
    con.print(t)
    for row in shown.itertuples(index=False) if spec.note else ():
        con.print("  " + spec.note(row), highlight=False)


def shown_columns(spec: registry.Table, df) -> list[registry.Column]:
    """The columns of ``spec`` that hold a value in ``df`` (and differ, where they must)."""
    return [c for c in spec.columns if c.key in df.columns and (c.unknown or df[c.key].notna().any())
            and not (c.varies and df[c.key].astype(str).nunique() < 2)]


def cell(value, c: registry.Column) -> str:
    """One value of column ``c`` for people."""
    text = units.fmt(value, c.unit)
    return c.unknown if c.unknown and text == units.MISSING else text


def facts_table(run: dict) -> Table:
    """The run's facts (the summary's ``run`` object) as pairs."""
    t = Table(title="Run", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    for label, value, warn in fact_rows(run):
        t.add_row(label, value, style="yellow" if warn else None)
    return t


def fact_rows(run: dict) -> list[tuple[str, str, bool]]:
    """The run's facts (the summary's ``run``) as (label, value, a warning): the CLI's and the dashboard's."""
    files = run["files"]
    loaded = len(run["ranks_loaded"])
    rows = [("source", f"{files[0]}" + (f" (+{len(files) - 1} more)" if len(files) > 1 else "")),
            ("format", str(run["format"])),
            ("ranks", f"{run['size']}" + (" (a Horovod timeline: rank 0's view of them)"
                                          if str(run["format"]).startswith("horovod") else
                                          f" ({loaded} with a trace)" if loaded != run["size"] else ""))]
    if len(run.get("hosts") or {}) > 1:
        rows.append(("hosts", "; ".join(f"{h}: ranks {', '.join(map(str, rs))}" for h, rs in run["hosts"].items())))
    rows += [("backend", str(run["backend"] or units.MISSING)), ("duration", units.duration(run["duration_ns"])),
             ("steps", str(run["steps"] or "– (no step marks)")),
             ("events / tensor ops / fused ops", " / ".join(units.count(run[k]) for k in ("events", "tensor_ops",
                                                                                         "fused_ops")))]
    if run["fusion_threshold"]:
        rows.append(("fusion threshold", units.size(run["fusion_threshold"])))
    for g in run.get("generations") or []:
        rows.append((f"generation {g['generation']}", f"{g['size']} rank(s) from step {g['step_base']}, "
                     f"{units.duration(g['start_ns'])} to {units.duration(g['end_ns'])}, ended: {g['end'] or '?'}"))
    out = [(label, value, False) for label, value in rows]
    if run["truncated_ranks"]:
        out.append(("truncated traces", ", ".join(map(str, sorted(run["truncated_ranks"]))), True))
    for f in dict.fromkeys(s["file"] for s in run["skipped"]):
        out.append(("damaged lines skipped", f"{f}: " + describe_skipped([s for s in run["skipped"] if s["file"] == f]),
                    True))
    return out


def findings_table(con, rows: list[dict]) -> None:
    t = Table(title="Findings", title_justify="left")
    t.add_column("#", justify="right")
    t.add_column("severity")
    t.add_column("finding", overflow="fold")
    for i, f in enumerate(rows, 1):
        t.add_row(str(i), f["severity"], f["message"], style=SEVERITY_STYLE.get(f["severity"], ""))
    if not rows:
        t.add_row("", "", "nothing stands out")
    con.print(t)
