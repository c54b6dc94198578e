"""The summary of one run as plain data: what ``ringscope summarize --json`` prints and ``--csv`` writes
(docs/SUMMARY_JSON.md), built from the registry's declarations: each analysis's key, rows and form."""
from __future__ import annotations

import json
import math
from pathlib import Path

from viewer import registry

SUMMARY_SCHEMA = "ringscope.summary/1"
# what the summary tells of each of an elastic run's worlds (docs/ELASTIC.md)
_GENERATION = ("generation", "size", "ranks", "hosts", "end", "step_base", "start_ns", "end_ns", "truncated_ranks")


def clean(v):
    """JSON-safe values: NaN/NA -> None, numpy -> python, inside lists and dicts too."""
    if v is None or v.__class__.__name__ in ("NAType", "NaTType"):
        return None
    if isinstance(v, dict):
        return {(int(k) if hasattr(k, "item") else k): clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    if hasattr(v, "tolist"):   # numpy scalars and arrays
        return clean(v.tolist())
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def records(df, limit: int | None = None) -> list[dict]:
    """DataFrame rows as JSON-safe dicts."""
    if df is None:
        return []
    if limit is not None:
        df = df.head(limit)
    cols = list(df.columns)
    return [{c: clean(v) for c, v in zip(cols, row)} for row in df.itertuples(index=False, name=None)]


def rows_of(run, a: registry.Analysis, **params):
    """Analysis ``a``'s rows as shown, written and summarized."""
    result = run.get(a.name, **{k: v for k, v in params.items() if k in a.params})
    return a.rows(result) if a.rows else result


def _encode(a: registry.Analysis, rows, top: int):
    if a.json == "object":
        return clean(rows)
    if a.json == "first":
        got = records(rows, 1)
        return got[0] if got else None
    if callable(a.json):
        return a.json(rows, top)
    return records(rows, top if a.json == "top" else None)


def _put(out: dict, key: str, value) -> None:
    *path, last = key.split(".")
    for k in path:
        out = out.setdefault(k, {})
    out[last] = value


def build_summary(run, top: int = 10, steps: bool = False, peak_busbw_gbps=None) -> dict:
    """The JSON summary: ``schema``, ``run``, every analysis under its key, and why some are ``unavailable``."""
    out: dict = {"schema": SUMMARY_SCHEMA, "run": clean(run_facts(run))}
    unavailable = {}
    for a in registry.ANALYSES.values():
        if a.json is None and not (steps and a.key == "breakdown_steps"):
            continue
        reason = run.why_not(a.name)
        if reason is None:
            _put(out, a.key, _encode(a, rows_of(run, a, peak_busbw_gbps=peak_busbw_gbps), top)
                 if a.json else records(rows_of(run, a)))
        elif "." not in a.key:
            _put(out, a.key, None if a.json in ("first", "object") else [])
            unavailable[a.key] = reason
    out["unavailable"] = unavailable
    return out


def write_csv(run, out: Path, peak_busbw_gbps=None) -> None:
    """Every analysis the run has, unabridged, as ``out/<name>.csv`` (lists of records as JSON)."""
    out.mkdir(parents=True, exist_ok=True)
    for a in registry.ANALYSES.values():
        if run.why_not(a.name) is not None or a.json == "object":
            continue
        df = rows_of(run, a, peak_busbw_gbps=peak_busbw_gbps)
        nested = [c for c in df.columns if df[c].dtype == object and df[c].map(lambda v: isinstance(v, (list, dict))
                                                                                 ).any()]
        df = df.assign(**{c: df[c].map(lambda v: json.dumps(clean(v))) for c in nested})
        df.to_csv(out / f"{a.name}.csv", index=False)


def run_facts(run) -> dict:
    """Facts about the run: source files, format, ranks, backend, duration, counts."""
    m = run.meta
    rows, first, last = run.tables.events_extent
    return {
        "format": m.get("format"), "files": list(m.get("files") or []), "size": run.size,
        "ranks_loaded": list(m.get("ranks_loaded") or []), "backend": m.get("backend"),
        "fusion_threshold": m.get("fusion_threshold"), "cycle_time_ms": m.get("cycle_time_ms"),
        "origin_epoch_ns": m.get("origin_epoch_ns"),
        "duration_ns": last - first,
        "steps": int(run.step_times()["step"].nunique()),
        "events": rows, "tensor_ops": int(len(run.tensor_ops)), "fused_ops": int(len(run.fused_ops)),
        "truncated_ranks": list(m.get("truncated_ranks") or []),
        "clock_offsets_ns": dict(zip(run.ranks["rank"], run.ranks["clock_offset_ns"])),
        "events_skipped": sum(s["events"] for s in m.get("skipped") or []),
        "skipped": list(m.get("skipped") or [])[:100],
        "last_event_ns": dict(zip(run.ranks["rank"], run.ranks["last_ts_ns"])),
        "hosts": hosts(run.ranks),
        "generations": [{k: g.get(k) for k in _GENERATION} for g in (m.get("elastic") or {}).get("generations", [])],
    }


def hosts(ranks) -> dict:
    """``{host: [ranks on it]}``, hosts in order of their first rank; ranks of unknown host left out."""
    out: dict = {}
    for r, h in sorted(zip(ranks["rank"], ranks["host"]), key=lambda rh: int(rh[0])):
        if isinstance(h, str) and h:
            out.setdefault(h, []).append(int(r))
    return out
