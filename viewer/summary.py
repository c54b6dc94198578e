"""The summary of one run as plain data: what ``ringscope summarize --json`` prints (docs/SUMMARY_JSON.md)."""
from __future__ import annotations

import math

SUMMARY_SCHEMA = "ringscope.summary/1"


def _clean(v):
    """JSON-safe scalars: NaN/NA -> None, numpy -> python."""
    if v is None:
        return None
    if hasattr(v, "item") and not isinstance(v, (list, dict, str)):
        try:
            v = v.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if v.__class__.__name__ in ("NAType", "NaTType"):
        return None
    if hasattr(v, "tolist"):
        return _clean(v.tolist())
    return v


def records(df, limit: int | None = None) -> list[dict]:
    """DataFrame rows as JSON-safe dicts."""
    if df is None:
        return []
    if limit is not None:
        df = df.head(limit)
    cols = list(df.columns)
    return [{c: _clean(v) for c, v in zip(cols, row)} for row in df.itertuples(index=False, name=None)]


def analyses(run, peak_busbw_gbps=None) -> dict:
    """Every analysis table of a run, computed once (shared by the JSON, CSV and rich outputs)."""
    from viewer.analyses import breakdown, fusion, hangs, stragglers

    neg = run.negotiations()
    fill = run.fusion()
    bw = run.communication(peak_busbw_gbps)
    hang_df = run.hangs()
    from viewer.analyses import communication

    return {
        "negotiations": stragglers.per_tensor(neg),
        "stragglers": with_hosts(run.stragglers(), run.ranks),
        "fused_ops": fill,
        "fusion": fusion.fusion_summary(fill),
        "tensor_sizes": run.tensor_sizes(),
        "cycles": run.cycle_utilisation(),
        "op_bandwidth": bw,
        "bandwidth": run.bandwidth_by_size(peak_busbw_gbps),
        "alpha_beta": communication.alpha_beta_fit(bw),
        "breakdown": run.breakdown(),
        "breakdown_by_rank": with_hosts(breakdown.breakdown_by_rank(run.breakdown()), run.ranks),
        "hangs": hang_df,
        "hangs_by_rank": hangs.hangs_by_rank(hang_df),
        "root_cause": run.root_causes(),
        "critical_path": run.critical_path(),
        "links": run.links_by_size(),
        "cross_link": run.cross_link_cost(),
        "late_hosts": run.late_hosts(),
        "recoveries": run.recoveries(),
        "findings": run.findings(peak_busbw_gbps),
    }


def with_hosts(df, ranks):
    """``df`` (one row per rank) with each rank's ``host`` after its ``rank`` column (None when unknown)."""
    from viewer.analyses import links

    host = links.hosts_of(ranks)
    out = df.copy()
    out.insert(1 if "rank" in out else 0, "host", [host.get(int(r)) for r in out["rank"]] if len(out) else [])
    return out


def run_facts(run) -> dict:
    """Facts about the run: source files, format, ranks, backend, duration, counts."""
    m = run.meta
    ops = run.tensor_ops
    steps = sorted(s for s in ops["step"].unique().tolist() if s >= 0) if len(ops) else []
    ev = run.events
    dur = int((ev["t_ns"] + ev["dur_ns"]).max() - ev["t_ns"].min()) if len(ev) else 0
    return {
        "format": m.get("format"), "files": list(m.get("files") or []), "size": run.size,
        "ranks_loaded": list(m.get("ranks_loaded") or []), "backend": m.get("backend"),
        "fusion_threshold": m.get("fusion_threshold"), "cycle_time_ms": m.get("cycle_time_ms"),
        "origin_epoch_ns": m.get("origin_epoch_ns"), "duration_ns": dur, "steps": len(steps),
        "events": int(len(ev)), "tensor_ops": int(len(ops)), "fused_ops": int(len(run.fused_ops)),
        "truncated_ranks": list(m.get("truncated_ranks") or []),
        "clock_offsets_ns": {int(r): _clean(o) for r, o in zip(run.ranks["rank"], run.ranks["clock_offset_ns"])},
        "events_skipped": sum(s["events"] for s in m.get("skipped") or []),
        "skipped": list(m.get("skipped") or [])[:100],
        "last_event_ns": {int(r): _clean(t) for r, t in zip(run.ranks["rank"], run.ranks["last_ts_ns"])},
        "hosts": hosts(run.ranks),
        "generations": generations(m),
    }


def generations(meta: dict) -> list[dict]:
    """An elastic run's worlds (docs/ELASTIC.md): number, size, ranks, hosts, how it ended, its first step
    number and its span on the run's axis; [] for another run."""
    keys = ("generation", "size", "ranks", "hosts", "end", "step_base", "start_ns", "end_ns", "truncated_ranks")
    return [{k: g.get(k) for k in keys} for g in (meta.get("elastic") or {}).get("generations", [])]


def hosts(ranks) -> dict:
    """``{host: [ranks on it]}``, hosts in order of their first rank; ranks of unknown host left out."""
    out: dict = {}
    for r, h in sorted(zip(ranks["rank"], ranks["host"]), key=lambda rh: int(rh[0])):
        if isinstance(h, str) and h:
            out.setdefault(h, []).append(int(r))
    return out


def slowest_paths(path, top: int):
    """The critical-path rows of the ``top`` longest steps (from the path's first start to its end)."""
    if path is None or not len(path):
        return path
    g = path.groupby("step")
    span = (g["end_ns"].max() - g["start_ns"].min()).sort_values(ascending=False, kind="stable")
    return path[path["step"].isin(span.index[:top])].reset_index(drop=True)


def build_summary(run, top: int = 10, tables: dict | None = None, steps: bool = False) -> dict:
    """The stable JSON summary (keys documented in docs/SUMMARY_JSON.md); ``steps`` adds the
    breakdown of every rank and step (``breakdown_steps``)."""
    t = tables or analyses(run)
    fusion = records(t["fusion"])
    extra = {"breakdown_steps": records(t["breakdown"])} if steps else {}
    return {
        "schema": SUMMARY_SCHEMA,
        "run": _clean_dict(run_facts(run)),
        "findings": records(t["findings"][["kind", "severity", "message"]], top),
        "stragglers": records(t["stragglers"], top),
        "negotiations": records(t["negotiations"].sort_values("wait_imposed_ns", ascending=False), top)
        if len(t["negotiations"]) else [],
        "fusion": fusion[0] if fusion else None,
        "tensor_sizes": records(t["tensor_sizes"]),
        "cycles": records(t["cycles"]),
        "bandwidth": records(t["bandwidth"]),
        "alpha_beta": records(t["alpha_beta"]),
        "breakdown": records(t["breakdown_by_rank"]),
        "hangs": records(t["hangs"], top),
        "hangs_by_rank": records(t["hangs_by_rank"]),
        "root_cause": [{**r, "counters": [_clean_dict(c) for c in r["counters"] or []]}
                       for r in records(t["root_cause"])],
        "critical_path": records(slowest_paths(t["critical_path"], top)),
        "links": records(t["links"]),
        "cross_link": records(t["cross_link"]),
        "late_hosts": records(t["late_hosts"]),
        "recoveries": records(t["recoveries"]),
        **extra,
    }


def _clean_dict(d: dict) -> dict:
    return {k: (_clean_dict(v) if isinstance(v, dict) else
                [_clean_dict(x) for x in v] if isinstance(v, list) and v and isinstance(v[0], dict) else _clean(v))
            for k, v in d.items()}
