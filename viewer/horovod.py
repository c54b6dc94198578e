"""Parse a Horovod timeline (rank 0's view; pid = one tensor) into the schema's tables, in local times. Per
tensor: B/E ``NEGOTIATE_<OP>`` holding rank-named X ticks (readiness), then B/E ``<OP>`` with nested activities,
its E with dtype and shape. Legacy files (before 0.20.1) have no epoch metadata and are never closed."""
from __future__ import annotations

import math
import re

from tracer import vocab as V
from viewer import frames
from viewer.errors import TraceError, warn_damage
from viewer.io.chrome_json import TraceReader
from viewer.io.ranges import CHROME_PHASES, INT32, MAX_BYTES, MAX_EPOCH_NS, MAX_US
from viewer.vocab import DTYPE_BYTES

_COMM = re.compile(r"^(MPI|NCCL|GLOO|CCL|DDL|ADASUM)_")
_BACKWARDS = "an 'E' before its 'B' (both left out)"


def _shape_elems(shape) -> int | None:
    """Elements of a shape (a list, or its text); ``MAX_BYTES`` or more where it cannot be a tensor's."""
    if isinstance(shape, str):
        nums = re.findall(r"\d+", shape)
    elif isinstance(shape, list):
        nums = shape
    else:
        return None
    n = 1
    for x in nums:
        if len(str(x)) > 15:
            return MAX_BYTES
        n *= int(x)
    return min(n, MAX_BYTES)


class _State:
    def __init__(self):
        self.names = {}        # pid -> tensor name
        self.stacks = {}       # pid -> [[name, ts, depth, args]]
        self.spans = []        # (pid, name, ts, dur, depth, args)
        self.ticks = []        # (pid, rank, ts, occurrence)
        self.neg_count = {}    # pid -> negotiations seen
        self.cycle_starts = []
        self.epoch_us = None
        self.last_ts = 0

    def feed(self, events, bad: dict):
        for ev in events:
            why = _unusable(ev)
            if why:
                bad[why] = bad.get(why, 0) + 1
                continue
            ph, pid, ts = ev.get("ph"), ev.get("pid"), ev.get("ts", 0)
            self.last_ts = max(self.last_ts, ts)
            if ph == "M":
                args = ev.get("args") or {}
                if ev.get("name") == "process_name":
                    if "start_time_since_epoch_in_micros" in args:
                        self.epoch_us = args["start_time_since_epoch_in_micros"]
                    elif "name" in args:
                        self.names[pid] = args["name"]
            elif ph == "B":
                st = self.stacks.setdefault(pid, [])
                name = ev.get("name", "")
                if name.startswith(V.NEGOTIATE_PREFIX):
                    self.neg_count[pid] = self.neg_count.get(pid, 0) + 1
                st.append([name, ts, len(st), ev.get("args")])
            elif ph == "E":
                st = self.stacks.get(pid)
                if st:
                    name, t0, depth, args = st.pop()
                    if ts < t0:   # an end before its begin: neither can be trusted
                        bad[_BACKWARDS] = bad.get(_BACKWARDS, 0) + 2
                        continue
                    if ev.get("args"):
                        args = dict(args or {}, **ev["args"])
                    self.spans.append((pid, name, t0, ts - t0, depth, args, True))
            elif ph == "X":
                name = ev.get("name", "")
                if _tick(name):
                    self.ticks.append((pid, int(name), ts, max(self.neg_count.get(pid, 1) - 1, 0)))
                else:
                    st = self.stacks.get(pid) or []
                    self.spans.append((pid, name, ts, ev.get("dur", 0), len(st), ev.get("args"), True))
            elif ph in ("i", "I") and ev.get("name") == "CYCLE_START":
                self.cycle_starts.append(ts)


def _tick(name: str) -> bool:
    """A readiness tick: an X named after the rank that became ready."""
    return name.isascii() and name.isdigit()


def _unusable(ev: dict):
    """Why an event cannot be used (a field of the wrong type, or outside what it can mean), or None."""
    ph = ev.get("ph")
    if ph.__class__ is not str or ev.get("name", None if ph in ("B", "X", "i") else "").__class__ is not str:
        return "event without a string 'ph' and 'name'"   # an E needs no name
    if ph not in CHROME_PHASES:
        return "'ph' is not a trace event phase"
    for k in ("ts", "dur"):
        v = ev.get(k, 0 if k == "dur" or ev.get("ph") == "M" else None)
        if v.__class__ not in (int, float) or not math.isfinite(v) or abs(v) > MAX_US or k == "dur" and v < 0:
            return f"'{k}' is not a time in µs"
    if ph == "X" and _tick(ev["name"]) and int(ev["name"]) >= INT32:
        return "a readiness tick's rank out of range"
    pid, args = ev.get("pid"), ev.get("args")
    if pid is not None and pid.__class__ not in (int, str):
        return "'pid' is not an integer"
    if args is not None and args.__class__ is not dict:
        return "'args' is not an object"
    if args:
        epoch = args.get("start_time_since_epoch_in_micros")
        if epoch is not None and (epoch.__class__ is not int or not 0 <= epoch < MAX_EPOCH_NS // 1000):
            return "'start_time_since_epoch_in_micros' is not a wall clock in µs"
        if any(args.get(k) is not None and args.get(k).__class__ is not str for k in ("name", "dtype")):
            return "'args.name' or 'args.dtype' is not a string"
        shape = args.get("shape")
        if shape is not None and not (shape.__class__ is str or shape.__class__ is list
                                      and all(x.__class__ is int and 0 <= x < 1 << 40 for x in shape)) \
                or (_shape_elems(shape) or 0) >= MAX_BYTES // 8:   # 8: the widest dtype
            return "'args.shape' is not a shape"
    return None


def parse_file(path, warn: bool = True) -> dict:
    """Per-file tables of one Horovod timeline (as rank 0's view), local times in ns."""
    reader = TraceReader(path)
    s = _State()
    bad: dict = {}
    for chunk in reader.chunks():
        s.feed(chunk, bad)
    s.spans += [(pid, name, t0, s.last_ts - t0, depth, args, False)   # still open at the end
                for pid, st in s.stacks.items() for name, t0, depth, args in st]
    for why, n in bad.items():  # the reader knows no line here: one entry per reason
        reader.skipped.append({"line": None, "byte": None, "reason": why, "events": n})
    fmt = "horovod-modern" if s.epoch_us is not None else "horovod-legacy"
    if not (s.spans or s.ticks or s.cycle_starts):
        raise TraceError(path, "no trace events" + (f" ({sum(x['events'] for x in reader.skipped)} unusable "
                                                    "event(s) skipped)" if reader.skipped else ""))
    closed = not reader.dropped and (fmt == "horovod-legacy" or reader.closed)
    t0 = 0 if fmt == "horovod-modern" else min([sp[2] for sp in s.spans] + [t[2] for t in s.ticks] + s.cycle_starts)
    out = _tables(s, t0)
    ranks_seen = sorted({r for _, r, _, _ in s.ticks})
    size = (max(ranks_seen) + 1) if ranks_seen else 1
    out["fused_ops"]["size"] = size
    backend = next((m.group(1).lower() for sp in s.spans if (m := _COMM.match(sp[1]))), None)
    out["rank_info"] = {
        "rank": 0, "host": None, "pid": None, "local_rank": None, "size": size, "backend": backend,
        "base_epoch_ns": None if s.epoch_us is None else int(s.epoch_us) * 1000,
        "clock_offset_ns": 0, "clock_offset_uncertainty_ns": None, "file": str(path), "format": fmt,
        "truncated": not closed, "events_dropped": None, "closed": closed,
        "events_skipped": sum(x["events"] for x in reader.skipped),
        "last_ts_ns": int(round((s.last_ts - t0) * 1000)),
    }
    out["meta"] = {"size": size, "backend": out["rank_info"]["backend"], "ranks_seen": ranks_seen,
                   "format": fmt, "_stop_offset": reader.stop_offset, "_size": reader.size,
                   "_n_events": reader.n_events, "_skipped": reader.skipped, "_damage": reader.damage,
                   "_last_local_ns": out["rank_info"]["last_ts_ns"],
                   "time_base": "epoch" if s.epoch_us is not None else "first event (legacy, no epoch)"}
    if warn:
        warn_damage(path, out["meta"], closed)
    return out


def _tables(s, t0) -> dict:
    ns = lambda us: int(round((us - t0) * 1000))  # noqa: E731
    tensor = lambda pid: s.names.get(pid, str(pid))  # noqa: E731
    ev = [{"thread": "tensor", "name": name, "cat": V.CAT_NEGOTIATION if name.startswith(V.NEGOTIATE_PREFIX)
           else V.CAT_COMM if _COMM.match(name) else V.CAT_TENSOR, "ph": "X", "t_ns": ns(ts),
           "dur_ns": int(round(dur * 1000)), "tensor": tensor(pid), "depth": depth, "value": None}
          for pid, name, ts, dur, depth, *_ in s.spans]
    ev += [{"thread": "negotiation", "name": V.READY, "cat": V.CAT_NEGOTIATION, "ph": "i", "t_ns": ns(ts),
            "dur_ns": 0, "tensor": tensor(pid), "depth": 1, "value": float(rank)} for pid, rank, ts, _ in s.ticks]
    ev += [{"thread": "cycles", "name": "CYCLE_START", "cat": V.CAT_CYCLE, "ph": "i", "t_ns": ns(ts), "dur_ns": 0,
            "tensor": None, "depth": 0, "value": None} for ts in s.cycle_starts]
    starts = sorted(s.cycle_starts)
    cycles = [{"cycle": i, "start_ns": ns(a), "end_ns": ns(b)} for i, (a, b) in enumerate(zip(starts, starts[1:]))]
    readiness = [{"tensor": tensor(p), "occurrence": o, "rank": r, "ready_ns": ns(t), "source": "horovod"}
                 for p, r, t, o in s.ticks]
    tensor_ops, fused_ops = _ops(s, ns)
    return {"events": frames.records("events", ev).sort_values("t_ns", kind="stable", ignore_index=True),
            "tensor_ops": tensor_ops, "fused_ops": fused_ops, "readiness": frames.records("readiness", readiness),
            "cycles": frames.records("cycles", cycles)}


def _ops(s, ns):
    """Tensor ops (one per NEGOTIATE) and fused ops (tensors whose comm activities overlap)."""
    by_pid = {}
    for sp in sorted(s.spans, key=lambda x: x[2]):
        by_pid.setdefault(sp[0], []).append(sp)
    ops = []
    for pid, spans in by_pid.items():
        cur = None
        occ = -1
        for _, name, ts, dur, depth, args, closed in spans:
            if depth != 0:
                if cur is not None and cur.get("op_ts") is not None and ts >= cur["op_ts"]:
                    cur.setdefault("acts", []).append((name, ts, dur))
                continue
            if name.startswith(V.NEGOTIATE_PREFIX):
                occ += 1
                cur = {"tensor": s.names.get(pid, str(pid)), "occ": occ, "op": name[len(V.NEGOTIATE_PREFIX):],
                       "submit": ts, "negotiated": ts + dur if closed else None}
                ops.append(cur)
            else:
                if cur is None or cur.get("op_ts") is not None:
                    occ += 1
                    cur = {"tensor": s.names.get(pid, str(pid)), "occ": occ, "op": name, "submit": ts,
                           "negotiated": ts}
                    ops.append(cur)
                cur.update(op=name, op_ts=ts, done=ts + dur if closed else None, args=args or {})
    fused = _fused_df(ops, ns)  # assigns each executed op its response id
    return _tensor_ops_df(ops, ns), fused


def _nbytes(op):
    a = op.get("args") or {}
    n = _shape_elems(a.get("shape"))
    size = DTYPE_BYTES.get(str(a.get("dtype")))
    return None if n is None or size is None else n * size


def _tensor_ops_df(ops, ns):
    return frames.records("tensor_ops", [{
        "tensor": o["tensor"], "occurrence": o["occ"], "op": o["op"], "dtype": (o.get("args") or {}).get("dtype"),
        "bytes": _nbytes(o), "response": o.get("response", -1), "submit_ns": ns(o["submit"]),
        "negotiated_ns": None if o["negotiated"] is None else ns(o["negotiated"]),
        "start_ns": None if o.get("op_ts") is None else ns(o["op_ts"]),
        "done_ns": None if o.get("done") is None else ns(o["done"]),
        "end_ns": None if o.get("done") is None else ns(o["done"])} for o in ops])


def _activity_ns(group, name) -> int:
    """The longest ``name`` activity (ns) among a fused group's ops; 0 when none has one."""
    return max((int(round(a[2] * 1000)) for o in group for a in o.get("acts", []) if a[0] == name), default=0)


def _fused_df(ops, ns):
    executed = [o for o in ops if o.get("op_ts") is not None]
    for o in executed:
        comm = [a for a in o.get("acts", []) if _COMM.match(a[0])]
        o["comm"] = comm[0] if comm else (o["op"], o["op_ts"], (o.get("done") or o["op_ts"]) - o["op_ts"])
    executed.sort(key=lambda o: o["comm"][1])
    groups = []
    for o in executed:
        g = groups[-1] if groups else None
        if g and o["comm"][0] == g[0]["comm"][0] and o["comm"][1] <= max(
                x["comm"][1] + x["comm"][2] for x in g):
            g.append(o)
        else:
            groups.append([o])
    rows = []
    for rid, g in enumerate(groups):
        for o in g:
            o["response"] = rid
        act = g[0]["comm"]
        m = _COMM.match(act[0])
        rows.append({
            "response": rid, "op": g[0]["op"], "backend": m.group(1).lower() if m else None, "activity": act[0],
            "dtype": (g[0].get("args") or {}).get("dtype"), "count": len(g), "bytes": sum(_nbytes(o) or 0 for o in g),
            "start_ns": ns(min(o["op_ts"] for o in g)), "end_ns": ns(max((o.get("done") or o["op_ts"]) for o in g)),
            "memcpy_in_ns": _activity_ns(g, V.MEMCPY_IN_FUSION_BUFFER),
            "memcpy_out_ns": _activity_ns(g, V.MEMCPY_OUT_FUSION_BUFFER),
            "comm_ns": max(int(round(o["comm"][2] * 1000)) for o in g), "tensors": [o["tensor"] for o in g]})
    return frames.records("fused_ops", rows)
