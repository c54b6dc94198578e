"""Big analyzer inputs made from a real run: replicate one real per-rank trace in time, up to 1,024+ ranks.

``build(src_dir, out_dir, ranks, events_per_rank)`` writes ``rank-0000R.json`` files in the tracer's
own line layout (head line, one event per line, tail). Each output rank copies a real rank (rank 0
from rank 0, the others round-robin from the real non-coordinator ranks) back to back (whole copies,
at least ``events_per_rank`` events), each copy shifted by the source's span, with ``step`` and
``response`` ids shifted so every copy is a new set of steps and collectives; the coordinator's READY
instants are duplicated for the extra ranks. Metadata (``M``) events are written once; ``meta``
instants (start/shutdown) are dropped, but for the closing record a finished run ends with.

What is planted: ``straggler`` (a rank) submits every tensor ``delay_ms`` later than its source did
(its ops still end when the collective does: the others waited for it), so it is last in every
negotiation. ``ranks_per_host`` names each rank's host (``node0000``...): with a multi-host source
(``sample_traces/two-hosts-slow-link``, whose cross-host link ran at 200 Mbit/s) the slow link shows
in the ring's collectives. Fast at scale: each distinct body (a source rank, planted or not) is
serialized once, and each output rank's copy only gets its pid written in.

A directory of torch.profiler (Kineto) traces instead (``rank-N...json[.gz]``, ``distributedInfo`` in the
header) is replicated whole, one copy per output rank, round-robin over the real ranks (``events_per_rank``
and the plants do not apply): what names the rank is rewritten (``distributedInfo``'s rank, world size and
process groups, the CPU process's pid, the file name); times, kernels and streams stay the source's, so every
copy of a source has its per-rank answers.
"""
from __future__ import annotations

import gzip
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
RANK_FILE = re.compile(r"rank-(\d+)\.json(\.gz)?$")
KINETO_FILE = re.compile(r"rank-(\d+)\.[\w.]*json(\.gz)?$")
_PID = 987_654_321   # a pid no source uses: each output rank's pid is written in its place
_PID_BYTES = b'"pid":%d' % _PID


def read_trace(path: Path) -> tuple[dict, list[dict]]:
    """(ringscope metadata, events) of one per-rank trace file in the tracer's layout (plain or gzipped)."""
    data = path.read_bytes()
    lines = (gzip.decompress(data) if path.name.endswith(".gz") else data).split(b"\n")
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


def _late(unit: list[dict], delay_us: float) -> list[dict]:
    """``unit`` with every tensor op submitted ``delay_us`` later, its end where it was (and each response
    negotiated as much later: it cannot come before its tensors' submission)."""
    ends = {}   # a B's E, so the B moves no later than its E
    for e in reversed(unit):
        if e.get("cat") == "tensor" and e.get("ph") == "E":
            ends[(e.get("tid"), e["name"])] = e["ts"]
        elif e.get("cat") == "tensor" and e.get("ph") == "B":
            ends[id(e)] = ends.pop((e.get("tid"), e["name"]), None)
    out = []
    for e in unit:
        if e.get("cat") == "tensor" and e.get("ph") == "X":
            shift = max(0.0, min(delay_us, e.get("dur", 0.0) - 1.0))
            e = dict(e, ts=e["ts"] + shift, dur=e.get("dur", 0.0) - shift)
        elif e.get("cat") == "tensor" and e.get("ph") == "B":
            end = ends.get(id(e))
            e = dict(e, ts=e["ts"] + delay_us if end is None else min(e["ts"] + delay_us, end - 1.0))
        elif isinstance((e.get("args") or {}).get("queue_ns"), int):
            e = dict(e, args=dict(e["args"], queue_ns=max(0, e["args"]["queue_ns"] - round(delay_us * 1000))))
        out.append(e)
    return out


def _body(unit: list[dict], copies: int, span: float, max_step: int, max_resp: int,
          world: tuple[int, int]) -> tuple[bytes, int]:
    """``copies`` time-shifted copies of ``unit`` as event lines (pid: the placeholder), and their count;
    ``world``: (the source's size, the output's), for the collectives' ``size``."""
    parts = []
    for k in range(copies):
        for e in unit:
            e2 = dict(e, pid=_PID, ts=round(e["ts"] + k * span, 3))
            a = e.get("args")
            if a and ("step" in a or "response" in a or a.get("size") == world[0]):
                a = dict(a)
                if a.get("size") == world[0]:
                    a["size"] = world[1]
                if isinstance(a.get("step"), int) and a["step"] >= 0:
                    a["step"] += k * max_step
                if isinstance(a.get("response"), int) and a["response"] >= 0:
                    a["response"] += k * max_resp
                e2["args"] = a
            parts.append(_dumps(e2))
    return b",\n".join(parts), len(parts)


def build(src_dir: Path, out_dir: Path, ranks: int, events_per_rank: int, *, straggler: int | None = None,
          delay_ms: float = 30.0, ranks_per_host: int | None = None) -> dict:
    """Write the replicated run; return ``{"files", "bytes", "events_per_rank", "copies", ...}``."""
    if _is_kineto(Path(src_dir)):
        return _build_kineto(Path(src_dir), Path(out_dir), ranks)
    src = {int(m.group(1)): read_trace(p) for p in sorted(Path(src_dir).iterdir())
           if (m := RANK_FILE.search(p.name))}
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
    bodies: dict[tuple[int, bool], tuple[bytes, int, int]] = {}
    total, written = 0, []
    for r in range(ranks):
        s = source_of[r]
        meta, evs = src[s]
        meta = dict(meta, rank=r, size=ranks, process_sets={"0": list(range(ranks))},
                    local_rank=r, local_size=ranks)
        if ranks_per_host:
            meta.update(host=f"node{r // ranks_per_host:04d}", local_rank=r % ranks_per_host,
                        local_size=ranks_per_host, cross_rank=r // ranks_per_host,
                        cross_size=-(-ranks // ranks_per_host))
        key = (s, r == straggler)
        if key not in bodies:
            unit = list(body[s])
            if s == 0:   # the coordinator also learns the extra ranks' readiness
                unit += [dict(e, args=dict(e["args"], rank=r2)) for e in unit if e.get("name") == "READY"
                         for r2 in range(len(real), ranks) if source_of[r2] == e["args"].get("rank")]
            if r == straggler:
                unit = _late(unit, delay_ms * 1000.0)
            copies = max(1, -(-events_per_rank // max(1, len(unit))))
            bodies[key] = (*_body(unit, copies, span, max_step, max_resp, (src[s][0].get("size"), ranks)), copies)
        lines, n, copies = bodies[key]
        path = out_dir / f"rank-{r:05d}.json"
        with open(path, "wb") as f:
            f.write(HEAD_PREFIX + _dumps(meta) + b"},\n" + b'"traceEvents": [\n')
            heads = [_dumps(dict(e, pid=r)) for e in evs if e.get("ph") == "M"]
            f.write(b",\n".join(heads))
            if lines:
                f.write((b",\n" if heads else b"") + lines.replace(_PID_BYTES, b'"pid":%d' % r))
            # the closing record a finished run ends with (else the viewer reports it unfinished)
            for e in evs:
                if e.get("cat") == "meta" and e.get("ph") == "i":
                    f.write(b",\n" + _dumps(dict(e, pid=r, ts=round(e["ts"] + (copies - 1) * span, 3))))
            f.write(b"\n]}\n")
        written.append(n)
        total += path.stat().st_size
    return {"files": ranks, "bytes": total, "events_per_rank": min(written, default=0),
            "copies": max(c for _, _, c in bodies.values()), "source_ranks": len(real),
            "straggler": straggler, "ranks_per_host": ranks_per_host}


def _kineto_sources(src_dir: Path) -> dict[int, Path]:
    return {int(m.group(1)): p for p in sorted(src_dir.iterdir()) if (m := KINETO_FILE.search(p.name))}


def _is_kineto(src_dir: Path) -> bool:
    """``src_dir`` holds Kineto traces (its first rank's file has no ringscope head line)."""
    files = _kineto_sources(src_dir)
    if not files:
        return False
    with (gzip.open if str(files[min(files)]).endswith(".gz") else open)(files[min(files)], "rb") as f:
        return not f.read(len(HEAD_PREFIX)).startswith(HEAD_PREFIX)


def _build_kineto(src_dir: Path, out_dir: Path, ranks: int) -> dict:
    """One copy of a real Kineto rank per output rank (``rank-0000R.json``), its rank names rewritten."""
    files = _kineto_sources(src_dir)
    real = sorted(files)
    out_dir.mkdir(parents=True, exist_ok=True)
    total, events = 0, {}
    for s in real:
        doc = _loads(gzip.decompress(files[s].read_bytes()) if files[s].name.endswith(".gz")
                     else files[s].read_bytes())
        ev = doc.pop("traceEvents")
        cpu = [e["pid"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_labels"
               and (e.get("args") or {}).get("labels") == "CPU" and isinstance(e.get("pid"), int)]
        body = b",\n".join(_dumps(dict(e, pid=_PID) if cpu and e.get("pid") == cpu[0] else e) for e in ev)
        events[s] = len(ev)
        for r in [r for r in range(ranks) if real[r % len(real)] == s]:
            info = dict(doc.get("distributedInfo") or {}, rank=r, world_size=ranks)
            if isinstance(info.get("pg_config"), list):
                info["pg_config"] = [dict(g, pg_size=ranks, ranks=list(range(ranks))) if g.get("pg_name") == "0"
                                     else g for g in info["pg_config"]]
            head = _dumps(dict(doc, distributedInfo=info))
            path = out_dir / f"rank-{r:05d}.json"
            with open(path, "wb") as f:
                f.write(head[:-1] + b',"traceEvents":[\n')
                f.write(body.replace(_PID_BYTES, b'"pid":%d' % (cpu[0] + r)) if cpu else body)
                f.write(b"\n]}\n")
            total += path.stat().st_size
    return {"files": ranks, "bytes": total, "events_per_rank": min(events.values(), default=0), "copies": 1,
            "source_ranks": len(real), "straggler": None, "ranks_per_host": None}
