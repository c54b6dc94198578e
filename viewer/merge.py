"""Merge per-rank traces into one Chrome trace on a common clock; overlapping slices get lanes of their own."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import orjson

from tracer import vocab as V
from viewer.analyses.recoveries import PARTS
from viewer.errors import TraceError, describe_skipped, warn_damage
from viewer.io.chrome_json import TraceReader, read_header
from viewer.io.files import detect_format
from viewer.io.ranges import CHROME_PHASES, MAX_US
from viewer.loader import check_ranks, find_traces
from viewer.ringscope import elastic

MERGED_KEY = "ringscope_merged"
_LANE_TID = 1_000_000  # overlap lanes get tid + k * 1e6 (clear of format 3's tensor threads, 1000 + k)
_THREAD_META = ("thread_name", "thread_sort_index")
_GEN_TID = 100_000     # a later generation's own threads (tensors, user threads): tid + generation * 1e5
_DRIVER_PID = 1 << 30  # the elastic driver's lane: one slice per reset


@dataclass
class RankSource:
    rank: int
    file: str
    format: str
    shift_ns: int          # add to the rank's local ns (ts * 1000) to get ns since the origin
    host: str | None = None
    legacy: bool = False   # a Horovod timeline from before 0.20.1: never closed, so no news if unclosed
    generation: int | None = None   # elastic runs: the world this trace belongs to (docs/ELASTIC.md)


@dataclass
class MergePlan:
    origin_epoch_ns: int | None
    ranks: list[RankSource] = field(default_factory=list)
    elastic: dict | None = None   # an elastic run's elastic.json (its resets get a lane of their own)


def plan_merge(paths, ranks: set[int] | None = None) -> MergePlan:
    """Work out each rank's clock shift from its recorded base and clock offset (headers only); ``ranks``: merge
    only these (time 0 stays the whole run's, so a subset lines up with the full merge)."""
    manifest, gen_of = None, {}
    if isinstance(paths, (str, Path)) and elastic.is_elastic(paths):
        manifest = elastic.read_manifest(paths)
        gen_of = {f: g for g, fs in elastic.generation_files(paths, manifest) for f in fs}
        files = list(gen_of)
    else:
        files = find_traces(paths) if isinstance(paths, (str, Path)) else [f for p in paths for f in find_traces(p)]
    entries = []
    for f in files:
        fmt = detect_format(f)
        if fmt == "merged":
            raise TraceError(f, "already a merged trace: merge the per-rank traces instead")
        # the header alone (a few KiB: a subset of a 1,024-rank run reads little of the others); Horovod's
        # clock is in its first events
        reader = TraceReader(f) if fmt == "horovod" else None
        other = (reader.header if reader else read_header(f)).get("otherData")
        meta = other.get(V.VERSION_KEY) if isinstance(other, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        base = _int(meta.get("base_epoch_ns"))
        if reader is not None:   # its wall clock: in the first events' args
            args = [e["args"] for e in next(reader.chunks(), [])[:5] if isinstance(e.get("args"), dict)]
            base = next((a["start_time_since_epoch_in_micros"] * 1000 for a in reversed(args)
                         if _int(a.get("start_time_since_epoch_in_micros")) is not None), None)
        abs0 = None if base is None else base - (_int(meta.get("clock_offset_ns")) or 0)
        rank = _int(meta.get("rank"))
        entries.append((len(entries) if rank is None else rank, str(f), fmt, abs0,
                        meta.get("host") if isinstance(meta.get("host"), str) else None, _int(meta.get("part"))))
    check_ranks((e[0], e[5], e[1], gen_of.get(f)) for e, f in zip(entries, files))
    known = [e[3] for e in entries if e[3] is not None]
    if known and manifest:   # time 0: the job's start, as the loader has it
        known += [g["start_epoch_ns"] for g in manifest["generations"]]
    origin = min(known) if known else None
    sources = [RankSource(r, f, fmt, 0 if a is None or origin is None else a - origin, host,
                        legacy=fmt == "horovod" and a is None, generation=gen_of.get(Path(f)))
             for r, f, fmt, a, host, _ in entries]
    if ranks is not None:
        have = sorted({s.rank for s in sources})
        unknown = sorted(ranks - set(have))
        if unknown:
            raise TraceError(paths if isinstance(paths, (str, Path)) else files[0].parent,
                             f"no trace of rank {_spans(unknown)} (the run has ranks {_spans(have)})")
        sources = [s for s in sources if s.rank in ranks]
    return MergePlan(origin, sorted(sources, key=lambda s: (s.rank, s.generation or 0)), manifest)


def _spans(ranks: list[int]) -> str:
    """``0-3, 7`` for sorted ranks."""
    out: list[list[int]] = []
    for r in ranks:
        if out and r == out[-1][1] + 1:
            out[-1][1] = r
        else:
            out.append([r, r])
    return ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in out)


def _int(v):
    """An integer header value, else None (a damaged header is unknown, not a crash)."""
    return v if v.__class__ is int and abs(v) < 1 << 62 else None


def _rank_events(src: RankSource):
    """The rank's events on the merged clock (unplaceable ones skipped); none placeable: :class:`TraceError`."""
    shift_us = src.shift_ns / 1000.0
    reader = TraceReader(src.file)
    out = []
    placed = 0
    for chunk in reader.chunks():
        for ev in chunk:
            ph, ts, dur, tid = ev.get("ph"), ev.get("ts"), ev.get("dur", 0), ev.get("tid", 0)
            if ph.__class__ is not str or ph not in CHROME_PHASES \
                    or (ts.__class__ not in _NUM or abs(ts) > MAX_US) and (ph != "M" or ts is not None) \
                    or dur.__class__ not in _NUM or not 0 <= dur <= MAX_US \
                    or tid.__class__ not in _ID or ev.get("pid", 0).__class__ not in _ID:
                reader.skip(None, "'ph', 'ts', 'dur', 'pid' or 'tid' missing, of the wrong type or out of range")
                continue
            if ph == "M" and not (src.format == "ringscope" and ev.get("name") in _THREAD_META
                                  and tid not in V.THREAD_NAMES):
                continue  # rewritten by _metadata; the rank's own extra threads (tensors) keep their names
            placed += ph != "M"
            if src.format == "ringscope":
                ev["pid"] = src.rank
                if "id" in ev:  # a plain id is global in Perfetto: keep ranks apart
                    ev["id"] = f"{src.rank}/{ev['id']}" if not src.generation else \
                        f"{src.rank}/g{src.generation}/{ev['id']}"
                if src.generation and ev.get("tid").__class__ is int and ev["tid"] not in V.THREAD_NAMES:
                    ev["tid"] += src.generation * _GEN_TID   # a later world numbers its tensor threads anew
            if ts is not None:
                ev["ts"] = round(ts + shift_us, 3)
            out.append(ev)
    if not placed and src.generation is None:
        raise TraceError(src.file, "no trace events" + (f" ({describe_skipped(reader.skipped)})"
                                                        if reader.skipped else ""))
    return out, reader


_NUM = (int, float)   # orjson yields no NaN or infinity, and no integer beyond 64 bits
_ID = (int, str)


def _relane(events: list) -> set:
    """Move X slices that overlap without nesting to extra lanes; returns the (pid, tid) lanes used."""
    lanes_used = set()
    stacks: dict = {}
    xs = [e for e in events if e.get("ph") == "X"]
    xs.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
    for e in xs:
        pid, tid = e.get("pid"), e.get("tid", 0)
        start = round(e["ts"] * 1000)  # compare in ns, the way trace processors round
        end = start + round(e.get("dur", 0) * 1000)
        k = 0
        while True:
            st = stacks.setdefault((pid, tid, k), [])
            while st and st[-1] <= start:
                st.pop()
            if not st or end <= st[-1]:
                st.append(end)
                break
            k += 1
        if k:
            e["tid"] = tid + k * _LANE_TID
            lanes_used.add((pid, tid, k))
    return lanes_used


def _metadata(src: RankSource | None, lanes: set, tids: set) -> list:
    """Metadata events: the rank's process (``src``, once per rank), its named threads and overlap lanes."""
    meta = []
    if src is not None and src.format == "ringscope":
        label = f"rank {src.rank}" + (f" ({src.host})" if src.host else "")
        meta += [{"ph": "M", "name": "process_name", "pid": src.rank, "args": {"name": label}},
                 {"ph": "M", "name": "process_sort_index", "pid": src.rank, "args": {"sort_index": src.rank}}]
    for pid, tid in sorted(tids, key=lambda x: (str(x[0]), str(x[1]))):
        if isinstance(tid, int) and tid in V.THREAD_NAMES:
            meta += _thread(pid, tid, V.THREAD_NAMES[tid])
    for pid, tid, k in sorted(lanes, key=lambda x: (str(x[0]), str(x[1]), x[2])):
        meta += _thread(pid, tid + k * _LANE_TID, f"{V.THREAD_NAMES.get(tid, str(tid))} (overlap {k})")
    return meta


def _thread(pid, tid: int, name: str) -> list:
    return [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}},
            {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}}]


def write_merged(plan: MergePlan, out, extra_events=None) -> dict:
    """Write the merged trace (one event per line) and return counts; ``extra_events``: on the merged clock."""
    extra = list(extra_events or [])
    extra_meta = [e for e in extra if e.get("ph") == "M"]
    extra_by_pid: dict = {}
    for e in extra:
        if e.get("ph") != "M":
            extra_by_pid.setdefault(e.get("pid"), []).append(e)
    ours = {s.rank for s in plan.ranks if s.format == "ringscope"}
    header = {MERGED_KEY: {"origin_epoch_ns": plan.origin_epoch_ns,
                           "ranks": [{"rank": s.rank, "file": s.file, "shift_ns": s.shift_ns,
                                      **({"generation": s.generation} if s.generation is not None else {})}
                                     for s in plan.ranks]}}
    if plan.elastic:
        header[MERGED_KEY]["elastic"] = {k: v for k, v in plan.elastic.items() if k != "file"}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    try:
        n_events, lanes_all, skipped = 0, set(), 0
        with open(out, "wb") as fh:
            fh.write(b'{"displayTimeUnit": "ms", "otherData": ' + orjson.dumps(header) + b',\n"traceEvents": [\n')
            first = True

            def put(evs):
                nonlocal first
                for e in evs:
                    fh.write((b"" if first else b",\n") + orjson.dumps(e))
                    first = False

            # one rank at a time, so memory holds one rank's events, not the whole run's
            if plan.elastic:
                put(_driver_lane(plan))
            seen_pids: set = set()
            for src in plan.ranks:
                events, reader = _rank_events(src)
                events += extra_by_pid.pop(src.rank, [])
                _report(src.file, reader, src.legacy)
                skipped += sum(x["events"] for x in reader.skipped)
                lanes = _relane(events)
                tids = {(e.get("pid"), e.get("tid")) for e in events
                        if "tid" in e and e.get("pid") in ours and isinstance(e.get("pid"), int)}
                put(_metadata(src if src.rank not in seen_pids else None, lanes, tids))
                seen_pids.add(src.rank)
                put(events)
                n_events += len(events)
                lanes_all |= lanes
                del events
            rest = [e for evs in extra_by_pid.values() for e in evs]
            lanes_all |= _relane(rest)
            put(extra_meta)
            put(rest)
            n_events += len(rest)
            fh.write(b"\n]}\n")
    except BaseException:
        Path(out).unlink(missing_ok=True)   # no half-written merge left behind a refused input
        raise
    return {"events": n_events, "ranks": len(plan.ranks), "overlap_lanes": len(lanes_all), "skipped": skipped}


def _driver_lane(plan: MergePlan) -> list:
    """An "elastic driver" process: a slice per generation and per reset, the reset's parts nested in it."""
    origin = plan.origin_epoch_ns or 0

    def us(ns):
        return round((ns - origin) / 1000.0, 3)

    def span(name, tid, a, b, **args):
        return {"ph": "X", "name": name, "cat": V.CAT_ELASTIC, "pid": _DRIVER_PID, "tid": tid, "ts": us(a),
                "dur": round((b - a) / 1000.0, 3), **args}

    out = [{"ph": "M", "name": "process_name", "pid": _DRIVER_PID, "args": {"name": "elastic driver"}},
           {"ph": "M", "name": "process_sort_index", "pid": _DRIVER_PID, "args": {"sort_index": -1}}]
    out += [{"ph": "M", "name": "thread_name", "pid": _DRIVER_PID, "tid": tid, "args": {"name": name}}
            for tid, name in enumerate(("generations", "resets", "work redone"), 1)]
    for g in plan.elastic["generations"]:
        if g.get("end_epoch_ns") is not None:
            out.append(span(f"generation {g['generation']} ({g['size']} ranks)", 1, g["start_epoch_ns"],
                            g["end_epoch_ns"], args={k: g.get(k) for k in ("generation", "size", "hosts", "end",
                                                                           "step_base")}))
    names = dict(PARTS)
    for r in plan.elastic["resets"]:
        t = [r.get(k) for k in ("failed_epoch_ns", "detected_epoch_ns", "reformed_epoch_ns", "restored_epoch_ns",
                                "first_step_end_epoch_ns")]
        end = next((x for x in reversed(t) if x is not None), t[0])
        out.append(span(f"{V.ELASTIC_RESET} {r['kind']}: {r.get('cause', '')}", 2, t[0], end,
                        args={k: v for k, v in r.items() if not k.endswith("_epoch_ns")}))
        out += [span(names[col], 2, a, b) for (col, _), a, b in zip(PARTS[1:], t, t[1:])
                if a is not None and b is not None]
        if r.get("last_commit_epoch_ns") is not None and r["kind"] == "lost":
            out.append(span("work redone (since the last commit)", 3, r["last_commit_epoch_ns"], r["failed_epoch_ns"]))
    return out


def _report(path, reader, legacy: bool) -> None:
    warn_damage(path, {"_stop_offset": reader.stop_offset, "_size": reader.size, "_n_events": reader.n_events,
                       "_skipped": reader.skipped, "_damage": reader.damage},
                not reader.dropped and (reader.closed or legacy))
