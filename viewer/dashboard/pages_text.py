"""The words on the pages: run facts, findings with their evidence, and what changed between runs."""
from __future__ import annotations

import pandas as pd
from dash import html

from viewer.dashboard import derive
from viewer.dashboard.components import fmt


def run_facts(view) -> list[tuple[str, str]]:
    t = view.tables
    meta, ranks, ev = t.meta, t.ranks, t.events
    span = (int(ev["t_ns"].max() - ev["t_ns"].min()) / 1e9) if len(ev) else None
    files = [str(f) for f in ranks["file"].dropna()] if len(ranks) else []
    formats = sorted({str(f) for f in ranks["format"].dropna()}) if len(ranks) else []
    truncated = int(ranks["truncated"].sum()) if len(ranks) else 0
    dropped = int(ranks["events_dropped"].fillna(0).sum()) if len(ranks) else 0
    return [
        ("source", str(view.path or meta.get("source") or view.label)),
        ("files", ", ".join(f.rsplit("/", 1)[-1] for f in files[:8]) + (" …" if len(files) > 8 else "")),
        ("format", ", ".join(formats) or "n/a"),
        ("ranks", str(derive.run_size(t))),
        *_hosts_fact(view.hosts),
        ("backend", str(meta.get("backend") or "n/a")),
        ("fusion threshold", fmt(derive.fusion_threshold(t), "{:,} B")),
        ("cycle time", fmt(meta.get("cycle_time_ms"), "{} ms")),
        ("time span", fmt(span, "{:,.3f} s")),
        ("events / tensor ops / fused ops", f"{len(ev):,} / {len(t.tensor_ops):,} / {len(t.fused_ops):,}"),
        ("truncated files / events dropped", f"{truncated} / {dropped:,}"),
        *_generations(meta),
    ]


def _hosts_fact(hosts: dict) -> list[tuple[str, str]]:
    """("hosts", "h0: ranks 0, 1; h1: ranks 2, 3") on two or more hosts, else nothing."""
    by: dict = {}
    for r in sorted(hosts):
        by.setdefault(hosts[r], []).append(str(r))
    if len(by) < 2:
        return []
    return [("hosts", "; ".join(f"{h}: ranks {', '.join(rs)}" for h, rs in by.items()))]


def _generations(meta) -> list[tuple[str, str]]:
    """An elastic run's worlds, one fact each (none for another run)."""
    out = []
    for g in (meta.get("elastic") or {}).get("generations", []):
        end = fmt(None if g["end_ns"] is None else g["end_ns"] / 1e9, "{:,.3f} s", "?")
        out.append((f"generation {g['generation']}", f"{g['size']} ranks from step {g['step_base']}, "
                    f"{g['start_ns'] / 1e9:,.3f} s to {end}, ended: {g['end'] or '?'}"))
    return out


def findings_block(view):
    """The analyses' recommendations, one per line with severity; a clear note when unavailable."""
    found = view.findings
    if isinstance(found, Exception):  # analyses missing or failing must not take the page down
        return html.P(f"recommendations unavailable: {' '.join(str(found).split())[:200]}",
                      className="muted", id="findings")
    if found is None or len(found) == 0:
        return html.P("no findings: nothing stands out in this run", className="muted", id="findings")
    rows = found.to_dict("records") if isinstance(found, pd.DataFrame) else [
        f if isinstance(f, dict) else {"sentence": str(f)} for f in found]
    items = []
    for r in rows:
        text = r.get("sentence") or r.get("text") or r.get("message") or str(r)
        sev = r.get("severity") or ""
        evidence = r.get("evidence") or r.get("action") or ""
        items.append(html.Li([html.Span(str(sev), className="sev"), str(text),
                              html.Div(str(evidence), className="muted") if evidence else None],
                             className="finding"))
    return html.Ul(items, id="findings")


def _pct_change(a, b):
    if a in (None, 0) or b is None:
        return ""
    return f"{(b - a) / abs(a) * 100:+.0f} %"


def compare_rows(a, b) -> pd.DataFrame:
    """Metrics and settings of run A and run B side by side, with the relative change."""
    ha, hb = a.headline(), b.headline()
    fa, fb = a.fusion, b.fusion
    rows = []

    def metric(name, va, vb, spec):
        rows.append({"what": name, "A: " + a.label: fmt(va, spec), "B: " + b.label: fmt(vb, spec),
                     "change": _pct_change(va, vb)})

    metric("step time (ms)", ha["step_ms"], hb["step_ms"], "{:,.2f}")
    metric("exposed communication (%)", ha["exposed_pct"], hb["exposed_pct"], "{:.1f}")
    metric("busbw efficiency (%)", None if ha["busbw_eff"] is None else ha["busbw_eff"] * 100,
           None if hb["busbw_eff"] is None else hb["busbw_eff"] * 100, "{:.0f}")
    metric("best busbw (GB/s)", ha["peak_gbps"], hb["peak_gbps"], "{:.3f}")
    metric("tensors per fused op", float(fa["count"].mean()) if len(fa) else None,
           float(fb["count"].mean()) if len(fb) else None, "{:.2f}")
    metric("median fill ratio", float(fa["fill"].median()) if len(fa) else None,
           float(fb["fill"].median()) if len(fb) else None, "{:.2f}")
    for name, va, vb in (("worst straggler", ha["straggler_rank"], hb["straggler_rank"]),
                         ("ranks", derive.run_size(a.tables), derive.run_size(b.tables)),
                         ("backend", a.tables.meta.get("backend"), b.tables.meta.get("backend")),
                         ("fusion threshold (B)", derive.fusion_threshold(a.tables),
                          derive.fusion_threshold(b.tables)),
                         ("cycle time (ms)", a.tables.meta.get("cycle_time_ms"), b.tables.meta.get("cycle_time_ms"))):
        rows.append({"what": name, "A: " + a.label: fmt(va, "{}"), "B: " + b.label: fmt(vb, "{}"),
                     "change": "changed" if va != vb else ""})
    return pd.DataFrame(rows)
