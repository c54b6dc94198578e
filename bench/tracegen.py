"""Big analyzer inputs made from a real run: replicate one real per-rank trace in time.

``build(src_dir, out_dir, ranks, events_per_rank)`` writes ``rank-0000R.json`` files in the tracer's
own line layout (head line, one event per line, tail). Each output rank copies a real rank (rank 0
from rank 0, the others round-robin from the real non-coordinator ranks) back to back (whole copies,
at least ``events_per_rank`` events), each copy shifted by the source's span, with ``step`` and
``response`` ids shifted so every copy is a new set of steps and collectives; the coordinator's READY
instants are duplicated for the extra ranks. Metadata (``M``) events are written once; ``meta``
instants (start/shutdown) are dropped.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

try:
    import orjson
    _loads, _dumps = orjson.loads, orjson.dumps
except ImportError:  # pragma: no cover
    _loads = json.loads
    _dumps = lambda o: json.dumps(o, separators=(",", ":")).encode()  # noqa: E731

HEAD_PREFIX = b'{"otherData": {"ringscope": '
RANK_FILE = re.compile(r"rank-(\d+)\.json$")


def read_trace(path: Path) -> tuple[dict, list[dict]]:
    """(ringscope metadata, events) of one per-rank trace file in the tracer's layout."""
    lines = path.read_bytes().split(b"\n")
    head = lines[0].rstrip()
    if not head.startswith(HEAD_PREFIX):
        raise ValueError(f"{path}: not a ringscope trace (no metadata head line)")
    meta = _loads(head[len(HEAD_PREFIX):].rstrip(b",").rstrip()[:-1])
    events = []
    for line in lines[2:]:
        line = line.strip().rstrip(b",")
        if line.startswith(b"{"):
            events.append(_loads(line))
    return meta, events


def _span_us(events) -> float:
    ts = [e["ts"] + e.get("dur", 0) for e in events if "ts" in e]
    return max(ts) - min(e["ts"] for e in events if "ts" in e)


def build(src_dir: Path, out_dir: Path, ranks: int, events_per_rank: int) -> dict:
    """Write the replicated run; return ``{"files", "bytes", "events_per_rank", "copies"}``."""
    src = {int(RANK_FILE.search(p.name).group(1)): read_trace(p)
           for p in sorted(Path(src_dir).glob("rank-*.json"))}
    if not src:
        raise ValueError(f"{src_dir}: no rank-*.json traces")
    real = sorted(src)
    others = [r for r in real if r != 0] or [0]
    source_of = {r: (0 if r == 0 else others[(r - 1) % len(others)]) for r in range(ranks)}
    body = {r: [e for e in evs if e.get("ph") != "M" and e.get("cat") != "meta"]
            for r, (_, evs) in src.items()}
    span = max(_span_us(b) for b in body.values()) + 1000.0
    max_step = max((e.get("args", {}).get("step", -1) for b in body.values() for e in b),
                   default=0) + 1
    max_resp = max((e.get("args", {}).get("response", -1) for b in body.values() for e in b
                    if isinstance(e.get("args", {}).get("response"), int)), default=0) + 1
    out_dir.mkdir(parents=True, exist_ok=True)
    total, copies_used, written = 0, 0, []
    for r in range(ranks):
        s = source_of[r]
        meta, evs = src[s]
        meta = dict(meta, rank=r, size=ranks, process_sets={"0": list(range(ranks))},
                    local_rank=r, local_size=ranks)
        unit = list(body[s])
        if s == 0:   # the coordinator also learns the extra ranks' readiness
            extra = []
            for e in unit:
                if e.get("name") == "READY":
                    for r2 in range(len(real), ranks):
                        if source_of[r2] == e["args"].get("rank"):
                            extra.append(dict(e, args=dict(e["args"], rank=r2)))
            unit += extra
        copies = max(1, -(-events_per_rank // max(1, len(unit))))
        copies_used = max(copies_used, copies)
        path = out_dir / f"rank-{r:05d}.json"
        with open(path, "wb") as f:
            f.write(HEAD_PREFIX + _dumps(meta) + b"},\n" + b'"traceEvents": [\n')
            first = True
            for e in evs:
                if e.get("ph") == "M":
                    f.write((b"" if first else b",\n") + _dumps(dict(e, pid=r)))
                    first = False
            n = 0
            for k in range(copies):
                for e in unit:
                    e2 = dict(e, pid=r, ts=round(e["ts"] + k * span, 3))
                    a = e.get("args")
                    if a and ("step" in a or "response" in a):
                        a = dict(a)
                        if isinstance(a.get("step"), int) and a["step"] >= 0:
                            a["step"] += k * max_step
                        if isinstance(a.get("response"), int) and a["response"] >= 0:
                            a["response"] += k * max_resp
                        e2["args"] = a
                    f.write((b"" if first else b",\n") + _dumps(e2))
                    first = False
                    n += 1
            # the closing record a finished run ends with (else the viewer reports it unfinished)
            for e in evs:
                if e.get("cat") == "meta" and e.get("ph") == "i":
                    f.write(b",\n" + _dumps(dict(e, pid=r, ts=round(e["ts"] + (copies - 1) * span, 3))))
            f.write(b"\n]}\n")
        written.append(n)
        total += path.stat().st_size
    return {"files": ranks, "bytes": total, "events_per_rank": min(written, default=0),
            "copies": copies_used, "source_ranks": len(real)}
