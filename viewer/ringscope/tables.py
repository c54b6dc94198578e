"""One rank's tables from its trace's event columns (:mod:`viewer.ringscope.reader`), vectorised over string codes."""
from __future__ import annotations

import bisect

import numpy as np

from tracer import vocab as V
from viewer import frames
from viewer.errors import TraceError, warn_damage
from viewer.io.columns import cumcount, dense, int_na, lookup, lut, ns, strings
from viewer.ringscope import events, phases
from viewer.ringscope.reader import known, read


class _Rows:
    """Row indices (into the file's events) of one kind, with the columns read once."""

    def __init__(self, cols):
        self.cols = cols
        self.ph, phv = cols.codes("ph")
        self.name, self.names = cols.codes("name")
        self.ts = cols.floats("ts", 0.0)
        self.dur = cols.floats("dur", 0.0)
        self.is_x = lut(phv, lambda v: v == "X")[self.ph]
        cat, cats = cols.codes("cat")
        # a lifecycle on its tensor's thread (X, or B/E), not a span
        self.own = lut(cats, lambda v: v == V.CAT_TENSOR)[cat] & lut(phv, lambda v: v in ("X", "B", "E"))[self.ph]
        self.plain = np.flatnonzero(lut(phv, lambda v: v in ("X", "i", "I", "n"))[self.ph] & ~self.own)
        self.counters = np.flatnonzero(lut(phv, lambda v: v == "C")[self.ph])
        self.is_end = lut(phv, lambda v: v == "E")[self.ph]
        self.step, _ = cols.ints("args.step", -1)
        self.resp, self.resp_ok = cols.ints("args.response", -1)
        self.ends = self.ts + np.where(self.is_x, self.dur, 0.0)
        self.last_ts = float(self.ends.max()) if cols.n else 0.0
        self.damaged: list = []   # (rows, why, events lost): values that contradict another event

    def damage(self, rows, why: str, lost: int) -> None:
        """Record events whose values contradict another event's (each loses ``lost`` events)."""
        self.damaged += [(int(x), why, lost) for x in self.cols.starts[rows].tolist()]

    def named(self, rows, *names):
        """The rows among ``rows`` whose name is one of ``names``."""
        wanted = set(names)
        return rows[lut(self.names, lambda v: v in wanted)[self.name[rows]]]


def build(cols, rank: int) -> dict:
    """One rank's five tables (local times), plus ``_last_ts_us``, ``_shutdown`` and ``_damaged``."""
    r = _Rows(cols)
    ops = _lifecycles(r)
    x = r.plain[r.is_x[r.plain]]
    fused = r.named(x, V.FUSED_RESPONSE)
    phases.attach(r, ops, fused)
    # clock offsets and drop count from the last SHUTDOWN record ({} when the run did not close)
    shutdown = dict(cols.shutdown) if len(r.named(r.plain, V.SHUTDOWN)) and cols.shutdown is not None else {}
    return {"events": events.table(r, ops, rank), "fused_ops": _fused(r, x, fused, rank),
            "tensor_ops": _tensor_ops(r, ops, fused, r.named(x, V.SYNCHRONIZE), rank),
            "readiness": _readiness(r), "cycles": _cycles(r, r.named(x, V.CYCLE), rank),
            "_last_ts_us": r.last_ts, "_shutdown": shutdown, "_damaged": r.damaged}


def _lifecycles(r):
    """The tensor ops, one per begin in file order; ``aid`` codes the tensor into ``r.aid_values``."""
    own = np.flatnonzero(r.own)
    r.aid, r.aid_values = r.name, r.names
    x = own[r.is_x[own]]
    be = own[~r.is_x[own]]
    tid, _ = r.cols.ints("tid", 0)
    pairs = _pair(r, be, dense(tid[be]))
    done = _op_rows(r, x, x)
    order = np.argsort(np.concatenate([done["b"], pairs["b"]]), kind="stable")
    ops = {c: np.concatenate([done[c], pairs[c]])[order] for c in pairs}
    ops["k"] = cumcount(ops["aid"])  # the k-th op of this tensor
    ob, oe = ops["b"], ops["e"]
    end_ok = (oe >= 0) & r.resp_ok[np.maximum(oe, 0)]
    ops["resp_ok"] = r.resp_ok[ob] | end_ok
    ops["resp"] = np.where(r.resp_ok[ob], r.resp[ob], np.where(end_ok, r.resp[np.maximum(oe, 0)], -1))
    return ops


def _pair(r, rows, group):
    """Begins among ``rows`` with the end of the same ``group`` (the k-th begin with the k-th end)."""
    is_end = r.is_end[rows]
    k = cumcount(group * 2 + is_end)
    bi, ei = np.flatnonzero(~is_end), np.flatnonzero(is_end)
    span = int(k.max()) + 1 if len(k) else 1
    m = lookup(group[ei] * span + k[ei], group[bi] * span + k[bi])
    b = rows[bi]
    e = np.where(m >= 0, rows[ei[np.maximum(m, 0)]] if len(ei) else -1, -1)
    back = (e >= 0) & (r.ts[np.maximum(e, 0)] < r.ts[b])   # an end before its begin: neither can be trusted
    if back.any():
        r.damage(b[back], "a tensor op's 'E' before its 'B' (both left out)", 2)
        b, e = b[~back], e[~back]
    return _op_rows(r, b, e)


def _op_rows(r, b, e):
    closed = e >= 0
    return {"b": b, "e": e, "closed": closed, "end_ts": np.where(closed, r.ends[np.maximum(e, 0)], r.last_ts),
            "aid": r.aid[b]}


def _priority(cols, rows):
    prio, ok = cols.ints("args.priority", 0)
    return int_na(prio[rows], ok[rows])


def _names(codes, values) -> list:
    return [values[c] if c >= 0 else None for c in codes.tolist()]


def _fused(r, x, fused, rank):
    cols = r.cols
    mem = r.named(x, V.MEMCPY_IN_FUSION_BUFFER, V.MEMCPY_OUT_FUSION_BUFFER)
    act = r.named(x, *V.COMM_ACTIVITIES)
    resp = r.resp[fused]
    mem_ns: dict = {}   # (into the buffer, response): ns
    is_in = lut(r.names, lambda v: v == V.MEMCPY_IN_FUSION_BUFFER)[r.name[mem]].tolist()
    for into, rid, d in zip(is_in, r.resp[mem].tolist(), ns(r.dur[mem]).tolist()):
        mem_ns[into, rid] = mem_ns.get((into, rid), 0) + d
    m = lookup(r.resp[act], resp)
    has, a = m >= 0, np.append(act, 0)[m]   # each response's first comm activity (row 0 where none)
    size = cols.floats("args.size")
    f_size = np.nan_to_num(size[fused], nan=0.0)
    tensors = [t or [] for t in cols.lists("args.tensors", fused)]
    count, count_ok = cols.ints("args.count", 0)
    bytes_, _ = cols.ints("args.bytes", 0)
    thr, thr_ok = cols.ints("args.threshold", 0)
    op, ops = cols.codes("args.op")
    dt, dts = cols.codes("args.dtype")
    bc, backends = cols.codes("args.backend")
    return frames.build("fused_ops", {
        "rank": np.full(len(fused), rank, dtype="int32"), "response": resp,
        "step": r.step[fused], "op": _names(op[fused], ops),
        "backend": _names(np.where(bc[fused] >= 0, bc[fused], np.where(has, bc[a], -1)), backends),
        "activity": _names(np.where(has, r.name[a], -1), r.names), "dtype": _names(dt[fused], dts),
        "count": np.where(count_ok[fused], count[fused], [len(t) for t in tensors]).astype("int64"),
        "bytes": bytes_[fused], "threshold": int_na(thr[fused], thr_ok[fused]),
        "start_ns": ns(r.ts[fused]), "end_ns": ns(r.ts[fused] + r.dur[fused]),
        "memcpy_in_ns": [mem_ns.get((True, rid), 0) for rid in resp.tolist()],
        "memcpy_out_ns": [mem_ns.get((False, rid), 0) for rid in resp.tolist()],
        "comm_ns": np.where(has, ns(r.dur[a]), 0),
        "size": np.where(has & ~np.isnan(size[a]), size[a], f_size).astype("int64"), "tensors": tensors,
        "priority": _priority(cols, fused)})


def _tensor_ops(r, ops, fused, syncs, rank):
    if not len(ops["b"]):
        return frames.empty("tensor_ops")
    cols = r.cols
    ob, oe, n = ops["b"], ops["e"], len(ops["b"])
    step = r.step[ob]
    m = ops["fused"]  # else the response it ran in
    resp = np.where(ops["resp_ok"], ops["resp"], np.where(m >= 0, r.resp[fused][np.maximum(m, 0)], -1)
                    if len(fused) else -1)
    err_codes, errs = cols.codes("args.error")
    err_end = np.where(oe >= 0, err_codes[np.maximum(oe, 0)], -1)   # the end's error, else the begin's
    err = (np.where(err_end >= 0, err_end, err_codes[ob]).astype(np.int32), errs)
    bytes_, bytes_ok = cols.ints("args.bytes", 0)
    ps, _ = cols.ints("args.process_set", 0)
    dtype, op = cols.codes("args.dtype"), cols.codes("args.op")
    end = ns(ops["end_ts"])
    return frames.build("tensor_ops", {
        "rank": np.full(n, rank, dtype="int32"), "tensor": strings([(ops["aid"], r.aid_values)]),
        "step": step, "occurrence": ops["k"], "op": strings([(op[0][ob], op[1])]),
        "dtype": strings([(dtype[0][ob], dtype[1])]),
        "bytes": int_na(bytes_[ob], bytes_ok[ob]), "process_set": ps[ob].astype("int32"), "response": resp,
        "submit_ns": ns(r.ts[ob]),
        "negotiated_ns": int_na(ops["neg_ns"], ops["neg_ok"]),
        "start_ns": int_na(ops["start_ns"], ops["start_ok"]),
        "done_ns": int_na(end, ops["closed"] & (err[0] < 0)),
        "end_ns": int_na(end, ops["closed"]),
        "wait_ns": _waits(r, ops, step, syncs), "error": strings([err]), "priority": _priority(cols, ob)})


def _waits(r, ops, step, syncs):
    """Framework SYNCHRONIZE time per tensor op: by (tensor, step), else the latest op of that tensor before it."""
    code_of = {v: i for i, v in enumerate(r.aid_values)}
    t_codes, t_vals = r.cols.codes("args.tensor")
    no_tensor = np.flatnonzero(t_codes[syncs] < 0)
    lists = dict(zip(no_tensor.tolist(), r.cols.lists("args.tensors", syncs[no_tensor]))) if len(no_tensor) else {}
    q = [(j, code_of.get(name, -1)) for j, c in enumerate(t_codes[syncs].tolist())   # (wait, tensor waited on)
         for name in ([t_vals[c]] if c >= 0 else lists.get(j) or [])]
    qj, q_aid = np.array([j for j, _ in q], dtype="int64"), np.array([a for _, a in q], dtype="int64")
    q_step, q_ts, q_dur = r.step[syncs][qj], ns(r.ts[syncs])[qj], ns(r.dur[syncs])[qj]
    aid = ops["aid"].astype("int64")
    n = len(aid)
    keys = dense(np.concatenate([step, q_step]))  # small step ids, so (tensor, step) fits one int64
    width = int(keys.max(initial=0)) + 1
    hit = lookup(aid * width + keys[:n], np.where(q_step >= 0, q_aid * width + keys[n:], -1))
    hit = np.where((q_step >= 0) & (q_aid >= 0), hit, -1)
    miss = [j for j in np.flatnonzero(hit < 0).tolist() if q_aid[j] >= 0]
    if miss:  # the latest op of that tensor submitted at or before the wait
        submit = ns(r.ts[ops["b"]]).tolist()
        by_aid: dict = {}
        for i in sorted(range(n), key=lambda i: (submit[i], i)):
            by_aid.setdefault(int(aid[i]), []).append((submit[i], i))
        for j in miss:
            lst = by_aid.get(int(q_aid[j]), [])
            k = bisect.bisect_right(lst, (int(q_ts[j]), n)) - 1
            if k >= 0:
                hit[j] = lst[k][1]
    ok = hit >= 0
    waits = np.zeros(n, dtype="int64")
    np.add.at(waits, hit[ok], q_dur[ok])
    return int_na(waits, np.bincount(hit[ok], minlength=n) > 0)


def _readiness(r):
    """One row per tensor of each READY: ``args.tensor``, else each of ``args.tensors``."""
    ready = r.named(r.plain, V.READY)
    cols = r.cols
    t_codes, t_vals = cols.codes("args.tensor")
    single = t_codes[ready] >= 0
    batched = ready[~single]
    l_codes, l_vals, l_parent = cols.list_items("args.tensors", batched)
    keep = l_codes >= 0
    src = np.concatenate([ready[single], batched[l_parent[keep]]])  # the READY event of each row
    order = np.argsort(src, kind="stable")                           # file order, list order
    src = src[order]
    index = {v: i for i, v in enumerate(t_vals)}   # one code per name, whichever field held it
    l_map = np.array([index.setdefault(v, len(index)) for v in l_vals] + [-1], dtype=np.int32)
    codes = np.concatenate([t_codes[ready[single]], l_map[l_codes[keep]]])[order].astype(np.int32)
    rk, _ = cols.ints("args.rank", -1)
    occ = cumcount(dense(codes) * (len(src) + 1) + dense(rk[src])) if len(src) else np.zeros(0, "int64")
    return frames.build("readiness", {
        "tensor": strings([(codes, list(index))]), "step": r.step[src], "occurrence": occ,
        "rank": rk[src], "ready_ns": ns(r.ts[src]), "source": ["ringscope"] * len(src)})


def _cycles(r, cyc, rank):
    cycle, _ = r.cols.ints("args.cycle", -1)
    return frames.build("cycles", {"rank": np.full(len(cyc), rank, dtype="int32"), "cycle": cycle[cyc],
                                   "start_ns": ns(r.ts[cyc]), "end_ns": ns(r.ts[cyc] + r.dur[cyc])})


def _cpu_set(v) -> str | None:
    if isinstance(v, list) and v and all(c.__class__ is int for c in v):
        return ",".join(map(str, v))
    return None


def parse_file(path, warn: bool = True) -> dict:
    """One ringscope trace's tables (local times), ``rank_info`` and ``meta`` (its ``otherData.ringscope``)."""
    reader, cols = read(path)
    meta = known(reader.other(V.VERSION_KEY))
    rank = meta.get("rank")
    if rank is None:
        pid, ok = cols.ints("pid", 0)
        rank = int(pid[ok][0]) if ok.any() and 0 <= pid[ok][0] < 1 << 31 else 0
    out = build(cols, rank)
    del cols
    for at, why, lost in out.pop("_damaged"):
        reader.skipped.append({"line": None, "byte": at, "reason": why, "events": lost})
    if not len(out["events"]):   # events of phases the tables do not read (flows, async pairs) only
        raise TraceError(path, "no trace events the viewer reads (X, B/E, i, C)")
    sd = out.pop("_shutdown")
    closed = reader.closed and not reader.dropped and (bool(sd) or not meta)
    last_us = out.pop("_last_ts_us")
    info = {"rank": rank, **{k: meta.get(k) if isinstance(meta.get(k), str) else None for k in ("host", "backend")},
            **{k: meta.get(k) for k in ("pid", "local_rank", "size", "base_epoch_ns")},
            **{k: meta.get(k, sd.get(k)) for k in ("clock_offset_ns", "clock_offset_uncertainty_ns")},
            "file": str(path), "format": _format(meta.get("source")),
            "truncated": not closed, "closed": closed,
            "events_dropped": sd.get("events_dropped"), "events_skipped": sum(s["events"] for s in reader.skipped),
            "last_ts_ns": int(round(last_us * 1000)), "cpu_set": _cpu_set(meta.get("cpu_set"))}
    meta.update(_stop_offset=reader.stop_offset, _size=reader.size, _n_events=len(out["events"]),
                _last_local_ns=info["last_ts_ns"], _skipped=reader.skipped, _damage=reader.damage)
    if warn:
        warn_damage(path, meta, closed)
    return {**out, "rank_info": info, "meta": meta}


def _format(source) -> str:
    """A trace's format from its run meta's ``source``: a watched torch job's (ddp, fsdp) or ours."""
    return source if source in (V.SOURCE_DDP, V.SOURCE_FSDP) else "ringscope"
