"""Parse one ringscope per-rank trace into per-rank tables (times local: ns since the rank's base).

:func:`viewer.loader` later shifts every time column onto the run's common axis.
"""
from __future__ import annotations

import sys

from tracer import vocab as V
from viewer.errors import warn_truncated
from viewer.jsonstream import TraceReader

_NESTED_ASYNC = (V.NEGOTIATE_PREFIX, V.QUEUE)
_SPAN_NAMES = frozenset({V.FUSED_RESPONSE, V.MEMCPY_IN_FUSION_BUFFER, V.MEMCPY_OUT_FUSION_BUFFER, V.CYCLE,
                         V.SYNCHRONIZE}) | V.COMM_ACTIVITIES


def _int_or(v, default):
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


class _Parser:
    """Accumulates columns event by event (one pass, plain lists: fast and lean)."""

    def __init__(self):
        self.cols = {k: [] for k in ("thread", "name", "cat", "ph", "ts", "dur", "tensor", "step",
                                     "response", "bytes", "value")}
        self.ops = []           # tensor lifecycles (dicts)
        self.open_async = {}    # id -> stack of open lifecycle dicts
        self.open_threads = {}  # tid -> open format-3 lifecycles (B without E yet), in file order
        self.fused = []         # FUSED_RESPONSE args + times
        self.memcpy = []        # (name, ts, dur, response)
        self.activity = []      # (name, ts, dur, response, args)
        self.ready = []         # (tensor, step, rank, ts)
        self.cycles = []        # (cycle, ts, dur)
        self.syncs = []         # (ts, dur, tensor(s), step)
        self.shutdown = {}
        self.pid = None
        self.last_ts = 0.0

    def row(self, thread, name, cat, ph, ts, dur, args):
        c = self.cols
        c["thread"].append(thread)
        c["name"].append(name)
        c["cat"].append(cat)
        c["ph"].append(ph)
        c["ts"].append(ts)
        c["dur"].append(dur)
        if args:
            c["tensor"].append(args.get("tensor"))
            c["step"].append(_int_or(args.get("step"), -1))
            c["response"].append(_int_or(args.get("response"), -1))
            b = args.get("bytes")
            c["bytes"].append(b if isinstance(b, int) else None)
        else:
            c["tensor"].append(None)
            c["step"].append(-1)
            c["response"].append(-1)
            c["bytes"].append(None)
        c["value"].append(None)

    def feed(self, events):
        threads = V.THREAD_NAMES
        intern = sys.intern
        tensor_cat = V.CAT_TENSOR
        c = self.cols
        a_thread, a_name, a_cat, a_ph = c["thread"].append, c["name"].append, c["cat"].append, c["ph"].append
        a_ts, a_dur, a_tensor, a_step = c["ts"].append, c["dur"].append, c["tensor"].append, c["step"].append
        a_resp, a_bytes, a_value = c["response"].append, c["bytes"].append, c["value"].append
        last = self.last_ts
        for ev in events:
            ph = ev.get("ph")
            if ph == "M":
                continue
            ts = ev.get("ts", 0.0)
            name = ev.get("name", "")
            args = ev.get("args")
            if (ph == "X" or ph == "B" or ph == "E") and ev.get("cat") == tensor_cat:
                end = self._own_thread(ph, ev.get("tid"), name, ts, ev.get("dur", 0.0), args)
                if end > last:
                    last = end
            elif ph == "X" or ph == "i" or ph == "I" or ph == "n":
                tid = ev.get("tid")
                name = intern(name)
                a_thread(threads.get(tid) or str(tid))
                a_name(name)
                cat = ev.get("cat")
                a_cat(intern(cat) if cat else cat)
                a_ts(ts)
                if ph == "X":
                    dur = ev.get("dur", 0.0)
                    a_ph("X")
                    a_dur(dur)
                    if ts + dur > last:
                        last = ts + dur
                else:
                    a_ph("i")
                    a_dur(0.0)
                    if ts > last:
                        last = ts
                a_value(None)
                if args:
                    tensor = args.get("tensor")
                    a_tensor(intern(tensor) if tensor.__class__ is str else None)
                    step = args.get("step", -1)
                    a_step(step if step.__class__ is int else _int_or(step, -1))
                    resp = args.get("response", -1)
                    a_resp(resp if resp.__class__ is int else _int_or(resp, -1))
                    b = args.get("bytes")
                    a_bytes(b if b.__class__ is int else None)
                else:
                    a_tensor(None)
                    a_step(-1)
                    a_resp(-1)
                    a_bytes(None)
                if ph == "X":
                    if name in _SPAN_NAMES:
                        self._span(name, ts, dur, args or {})
                elif name == V.READY and args:
                    self._ready(args, ts)
                elif name == V.SHUTDOWN and args:
                    self.shutdown = args
            elif ph == "b" or ph == "e":
                id2 = ev.get("id2")
                aid = id2.get("local", id2.get("global")) if id2.__class__ is dict else ev.get("id")
                self._async(ph, aid, name, ev.get("cat"), ts, args)
                if ts > last:
                    last = ts
            elif ph == "C":
                if ts > last:
                    last = ts
                for key, val in (args or {}).items():
                    self.row("counter", name if len(args) == 1 else f"{name}.{key}",
                             ev.get("cat", V.CAT_COUNTER), "C", ts, 0.0, None)
                    c["value"][-1] = float(val) if isinstance(val, (int, float)) else None
            if self.pid is None and "pid" in ev:
                self.pid = ev["pid"]
        self.last_ts = last

    def _ready(self, args, ts):
        """One readiness tick per tensor: ``args.tensor``, else each of ``args.tensors`` (one line
        for a run of tensors the same rank became ready with)."""
        tensor = args.get("tensor")
        names = [tensor] if tensor.__class__ is str else args.get("tensors")
        if names.__class__ is not list:
            return
        step, rank = _int_or(args.get("step"), -1), _int_or(args.get("rank"), -1)
        self.ready.extend((t, step, rank, ts) for t in names if t.__class__ is str)

    def _span(self, name, ts, dur, args):
        if name == V.FUSED_RESPONSE:
            self.fused.append((ts, dur, args))
        elif name == V.MEMCPY_IN_FUSION_BUFFER or name == V.MEMCPY_OUT_FUSION_BUFFER:
            self.memcpy.append((name, ts, dur, _int_or(args.get("response"), -1)))
        elif name in V.COMM_ACTIVITIES:
            self.activity.append((name, ts, dur, _int_or(args.get("response"), -1), args))
        elif name == V.CYCLE:
            self.cycles.append((_int_or(args.get("cycle"), -1), ts, dur))
        elif name == V.SYNCHRONIZE:
            self.syncs.append((ts, dur, args.get("tensor") or args.get("tensors"),
                               _int_or(args.get("step"), -1)))

    def _lifecycle(self, tensor, name, cat, ts, args):
        op = {"tensor": tensor, "submit": ts, "args": dict(args or {}), "parts": {}, "name": name, "cat": cat}
        self.ops.append(op)
        return op

    @staticmethod
    def _done(op, ts, args):
        if args:
            op["args"].update(args)
        op["done"] = ts

    def _own_thread(self, ph, tid, name, ts, dur, args):
        """A format-3 lifecycle event (on its tensor's thread; the tensor is its name): an X is a
        finished op, a B opens one that the tid's next E closes. Returns the event's end."""
        if ph == "X":
            self._done(self._lifecycle(name, name, V.CAT_TENSOR, ts, args), ts + dur, None)
            return ts + dur
        if ph == "B":
            self.open_threads.setdefault(tid, []).append(self._lifecycle(name, name, V.CAT_TENSOR, ts, args))
        elif self.open_threads.get(tid):
            self._done(self.open_threads[tid].pop(0), ts, args)
        return ts

    def _async(self, ph, aid, name, cat, ts, args):
        stack = self.open_async.setdefault(aid, [])
        nested = name.startswith(_NESTED_ASYNC)
        if ph == "b":
            if not nested:
                stack.append(self._lifecycle(aid if aid is not None else name, name, cat, ts, args))
            elif stack:
                stack[-1]["parts"][name] = [ts, None, args]
            return
        if not stack:
            return
        op = stack[-1]
        if nested:
            part = op["parts"].get(name)
            if part is not None and part[1] is None:
                part[1] = ts
                if args:
                    op["args"].update(args)
            return
        self._done(op, ts, args)
        stack.pop()


def _parse_slow(reader) -> dict:
    """Per-event Python parse (any layout; what the fast path falls back to)."""
    from viewer.tables_ringscope import build_tables

    p = _Parser()
    for chunk in reader.chunks():
        p.feed(chunk)

    def _build(rank):
        out = build_tables(p, rank)
        out.update(_shutdown=p.shutdown, _last_ts_us=p.last_ts)
        return out
    return {"_pid": p.pid, "_build": _build}


def _parse_fast(reader):
    """Columnar parse through Arrow, or None when this file needs the Python parser (then
    ``reader.data`` may have been let go: the caller reads the file again)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:  # pragma: no cover
        return None
    from viewer.fast_ringscope import Fallback, pid_of, read_columns
    from viewer.fast_tables import build

    other = reader.header.get("otherData")
    meta = other.get(V.VERSION_KEY) if isinstance(other, dict) else None
    with_pid = not isinstance(meta, dict) or _int_or(meta.get("rank"), None) is None  # else pid is unused
    try:
        cols, closed, dropped, stop = read_columns(reader, with_pid)
        if cols is None:
            return None
        ph, phv = cols.codes("ph")
        n_events = int(len(ph) - (ph == phv.index("M")).sum()) if "M" in phv else len(ph)
        pid = pid_of(cols) if with_pid else None
        reader.data = b""  # the raw bytes are no longer needed
        tables = build(cols, 0)  # rank fixed below; tables hold it only in their rank column
    except Fallback:
        return None
    del cols
    reader.closed, reader.dropped, reader.stop_offset, reader.n_events = closed, dropped, stop, n_events

    def _build(rank):
        import numpy as np

        for name in ("events", "tensor_ops", "fused_ops", "cycles"):
            df = tables[name]
            df["rank"] = np.full(len(df), rank, dtype="int32")
        return tables
    return {"_pid": pid, "_build": _build}


def parse_file(path, warn: bool = True, fast: bool = True) -> dict:
    """Per-rank tables of one ringscope trace: ``{table: DataFrame, "rank_info": dict, "meta": dict}``.

    Times are local (ns since this rank's ts == 0); ``meta`` is the file's ``otherData.ringscope``.
    """
    reader = TraceReader(path)
    out = _parse_fast(reader) if fast else None
    if out is None:
        if not reader.data:
            reader = TraceReader(path)
        out = _parse_slow(reader)
    other = reader.header.get("otherData") or {}
    meta = dict(other.get(V.VERSION_KEY) or {}) if isinstance(other, dict) else {}
    pid = out.pop("_pid")
    rank = _int_or(meta.get("rank"), None)
    if rank is None:
        rank = _int_or(pid, 0)
    out = out.pop("_build")(rank)
    sd = out.pop("_shutdown")
    # cut mid-file, or complete JSON without the SHUTDOWN record: the job died before closing it
    truncated = reader.dropped or not reader.closed or (bool(meta) and not sd)
    if truncated and warn:
        warn_truncated(path, reader.stop_offset, reader.size, reader.n_events)
    last_ts = out.pop("_last_ts_us")
    info = {
        "rank": rank, "host": meta.get("host"), "pid": _int_or(meta.get("pid"), None),
        "local_rank": _int_or(meta.get("local_rank"), None), "size": _int_or(meta.get("size"), None),
        "backend": meta.get("backend"), "base_epoch_ns": _int_or(meta.get("base_epoch_ns"), None),
        "clock_offset_ns": _int_or(meta.get("clock_offset_ns", sd.get("clock_offset_ns")), None),
        "clock_offset_uncertainty_ns": _int_or(meta.get("clock_offset_uncertainty_ns",
                                                        sd.get("clock_offset_uncertainty_ns")), None),
        "file": str(path), "format": "ringscope", "truncated": bool(truncated),
        "events_dropped": _int_or(sd.get("events_dropped"), None),
    }
    out["rank_info"] = info
    out["meta"] = meta
    out["meta"]["_stop_offset"] = reader.stop_offset
    out["meta"]["_size"] = reader.size
    out["meta"]["_last_local_ns"] = int(last_ts * 1000)
    if not meta and not reader.n_events:
        from viewer.errors import TraceError
        raise TraceError(path, "no trace events")
    return out


