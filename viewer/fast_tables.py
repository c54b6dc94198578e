"""Vectorised construction of one rank's tables from the Arrow-parsed columns of :mod:`viewer.fast_ringscope`.

A tensor lifecycle is an async b/e pair (formats 1 and 2) or, in format 3, an X (or a B/E pair) with
``cat`` "tensor" on the tensor's own thread. Begins and ends of one (id, name), or of one such thread,
alternate in time (a tensor name is in flight at most once), so the k-th begin pairs with the k-th end;
a nested NEGOTIATE/QUEUE slice (format 1) belongs to the lifecycle of its tensor open at its begin.
Formats 2 and 3 have no nested slices: :mod:`viewer.fast_phases` rebuilds them from the responses.
Rows are selected and joined as numpy index arrays over string codes (:mod:`viewer.fast_columns`);
strings are built once, for the output columns.
"""
from __future__ import annotations

import numpy as np

from tracer import vocab as V
from viewer import fast_phases, frames
from viewer.fast_columns import (coalesce, constant, cumcount, dense, int_na, lookup, lut, ns, strings, unify,
                                 with_default)


class _Rows:
    """Row indices (into the file's events) of one kind, with the columns read once."""

    def __init__(self, cols):
        from viewer.fast_ringscope import Fallback

        self.cols = cols
        self.ph, phv = cols.codes("ph")
        self.name, self.names = cols.codes("name")
        if (self.ph < 0).any() or (self.name < 0).any():
            raise Fallback("events without ph or name")
        self.ts = cols.floats("ts", 0.0)
        self.dur = cols.floats("dur", 0.0)
        self.is_x = lut(phv, lambda v: v == "X")[self.ph]
        cat, cats = cols.codes("cat")
        # format 3: a lifecycle on its tensor's thread (X, or B/E), not a span
        self.own = lut(cats, lambda v: v == V.CAT_TENSOR)[cat] & lut(phv, lambda v: v in ("X", "B", "E"))[self.ph]
        self.plain = np.flatnonzero(lut(phv, lambda v: v in ("X", "i", "I", "n"))[self.ph] & ~self.own)
        self.asy = np.flatnonzero(lut(phv, lambda v: v in ("b", "e"))[self.ph])
        self.counters = np.flatnonzero(lut(phv, lambda v: v == "C")[self.ph])
        self.is_end = lut(phv, lambda v: v in ("e", "E"))[self.ph]
        self.step, self.step_ok = cols.ints("args.step", -1)
        self.resp, self.resp_ok = cols.ints("args.response", -1)
        self.ends = self.ts + np.where(self.is_x, self.dur, 0.0)
        self.last_ts = float(self.ends.max()) if cols.n else 0.0

    def named(self, rows, *names):
        """The rows among ``rows`` whose name is one of ``names``."""
        wanted = set(names)
        return rows[lut(self.names, lambda v: v in wanted)[self.name[rows]]]


def build(cols, rank: int) -> dict:
    """``{events, tensor_ops, fused_ops, readiness, cycles, _last_ts_us, _shutdown}``."""
    r = _Rows(cols)
    outer, parts = _lifecycles(r)
    x = r.plain[r.is_x[r.plain]]
    fused = r.named(x, V.FUSED_RESPONSE)
    fast_phases.attach(r, outer, parts, fused)
    return {"events": _events(r, outer, parts, rank), "fused_ops": _fused(r, x, fused, rank),
            "tensor_ops": _tensor_ops(r, outer, parts, fused, r.named(x, V.SYNCHRONIZE), rank),
            "readiness": _readiness(r), "cycles": _cycles(r, r.named(x, V.CYCLE), rank),
            "_last_ts_us": r.last_ts, "_shutdown": _shutdown(r)}


def _lifecycles(r):
    """(outer lifecycles, nested phases): dicts of arrays, one entry per begin, in file order of the
    begin. ``r.aid`` codes each row's tensor into ``r.aid_values``: the async id, or (format 3) the
    event's name."""
    from viewer.fast_ringscope import Fallback

    cols = r.cols
    ids = coalesce(coalesce(cols.codes("id2.local"), cols.codes("id2.global")), cols.codes("id"))
    (id_codes, name_codes), r.aid_values = unify(ids, (r.name, r.names))
    if (id_codes[r.asy] < 0).any():
        raise Fallback("async events without an id")
    r.aid = np.where(r.own, name_codes, id_codes)
    outer, parts = _pair_async(r)
    own = _pair_threads(r)
    order = np.argsort(np.concatenate([outer["b"], own["b"]]), kind="stable")
    outer = {c: np.concatenate([outer[c], own[c]])[order] for c in outer}
    outer["k"] = cumcount(outer["aid"])  # the k-th lifecycle of this tensor
    _link(r, outer, parts)
    return outer, parts


def _pair(r, rows, group):
    """Begins among ``rows`` with the end of the same ``group`` (the k-th begin with the k-th end):
    ``{b, e (-1 if none), closed, end_ts, aid}`` (``k``: the begin's k), in file order."""
    is_end = r.is_end[rows]
    k = cumcount(group * 2 + is_end)
    bi, ei = np.flatnonzero(~is_end), np.flatnonzero(is_end)
    span = int(k.max()) + 1 if len(k) else 1
    m = lookup(group[ei] * span + k[ei], group[bi] * span + k[bi])
    b = rows[bi]
    e = np.where(m >= 0, rows[ei[np.maximum(m, 0)]] if len(ei) else -1, -1)
    return _outer(r, b, e, k[bi])


def _outer(r, b, e, k):
    closed = e >= 0
    return {"b": b, "e": e, "closed": closed, "end_ts": np.where(closed, r.ends[np.maximum(e, 0)], r.last_ts),
            "aid": r.aid[b], "k": k}


def _pair_async(r):
    """Async b/e pairs: (outer lifecycles, nested format-1 phases)."""
    asy = r.asy
    pairs = _pair(r, asy, dense(r.aid[asy].astype("int64") * (len(r.names) + 1) + r.name[asy]))
    nested = lut(r.names, lambda v: v.startswith(V.NEGOTIATE_PREFIX) or v == V.QUEUE)[r.name[pairs["b"]]]
    return {c: v[~nested] for c, v in pairs.items()}, {c: v[nested] for c, v in pairs.items()}


def _pair_threads(r):
    """Format-3 lifecycles: each X is one (begin and end on one row); B/E pair per tid."""
    own = np.flatnonzero(r.own)
    x = own[r.is_x[own]]
    be = own[~r.is_x[own]]
    tid, _ = r.cols.ints("tid", 0)
    pairs = _pair(r, be, dense(tid[be]))
    done = _outer(r, x, x, np.zeros(len(x), dtype="int64"))
    return {c: np.concatenate([done[c], pairs[c]]) for c in pairs}


def _link(r, outer, parts):
    """Each nested phase's lifecycle (``parts["outer"]``: index into outer, -1 if none), and the
    response each lifecycle ended with (``outer["resp"]``, ``outer["resp_ok"]``)."""
    ob, oe = outer["b"], outer["e"]
    end_ok = (oe >= 0) & r.resp_ok[np.maximum(oe, 0)]
    outer["resp_ok"] = r.resp_ok[ob] | end_ok
    outer["resp"] = np.where(r.resp_ok[ob], r.resp[ob], np.where(end_ok, r.resp[np.maximum(oe, 0)], -1))
    # a phase belongs to the lifecycle of its tensor open at its begin (in file order), as the Python
    # parser's stack has it; the k-th phase of one name is not the k-th lifecycle when the tensor's op
    # type changes (a broadcast, then allreduces of the same name)
    parts["outer"] = np.full(len(parts["b"]), -1, dtype="int64")
    if len(ob):
        width = r.cols.n + 1
        okey = outer["aid"].astype("int64") * width + ob
        order = np.argsort(okey, kind="stable")
        j = np.searchsorted(okey[order], parts["aid"].astype("int64") * width + parts["b"], side="right") - 1
        o = order[np.maximum(j, 0)]
        ok = (j >= 0) & (outer["aid"][o] == parts["aid"]) & ((oe[o] < 0) | (parts["b"] < oe[o]))
        parts["outer"] = np.where(ok, o, -1)


def _events(r, outer, parts, rank):
    cols = r.cols
    p, c = r.plain, r.counters
    pb, ob = parts["b"], outer["b"]
    n_p, n_o, n_n, n_c = len(p), len(ob), len(pb), len(c)
    # span and instant rows
    tid, tid_ok = cols.ints("tid", 0)
    tids, tid_code = np.unique(tid[p], return_inverse=True)
    thread_p = (np.where(tid_ok[p], tid_code.reshape(-1), -1).astype(np.int32),
                [V.THREAD_NAMES.get(t, str(t)) for t in tids.tolist()])
    is_x = r.is_x[p]
    span_dur = np.where(is_x, ns(r.dur[p]), 0)
    # nested phases: step from their lifecycle, else their own; response from their lifecycle
    po = parts["outer"]
    has_o = po >= 0
    o_of = ob[np.maximum(po, 0)] if n_o else np.zeros(n_n, dtype="int64")
    o_step_ok = has_o & r.step_ok[o_of]
    part_step = np.where(o_step_ok, r.step[o_of], r.step[pb])
    part_resp = np.where(has_o, outer["resp"][np.maximum(po, 0)] if n_o else -1, -1)
    # format 2: the nested phases rebuilt from the responses (as their lifecycle's own row carries it)
    si, s_name, s_t, s_dur = fast_phases.rebuilt_rows(r, outer, _codes_at(cols, "args.op", ob))
    n_n += len(si)
    t_ns = np.concatenate([ns(r.ts[p]), ns(r.ts[ob]), ns(r.ts[pb]), s_t, ns(r.ts[c])])
    order = np.argsort(t_ns, kind="stable")
    depth = np.concatenate([_depths(thread_p[0], ns(r.ts[p]), span_dur, ~is_x),
                            np.zeros(n_o, dtype="int32"), np.ones(n_n, dtype="int32"),
                            np.zeros(n_c, dtype="int32")])
    name, names = r.name, r.names
    cat, cats = cols.codes("cat")
    part_step = np.concatenate([part_step, r.step[ob[si]]])
    part_resp = np.concatenate([part_resp, outer["resp"][si]])
    tensor = cols.codes("args.tensor")
    bytes_, bytes_ok = cols.ints("args.bytes", 0)
    value = cols.floats("args.value")
    events = {
        "rank": np.full(len(t_ns), rank, dtype="int32"),
        "thread": strings([thread_p, constant(n_o + n_n, "tensor"), constant(n_c, "counter")], order),
        "name": strings([(name[p], names), (name[ob], names), (name[pb], names), s_name, (name[c], names)],
                        order),
        "cat": strings([(cat[p], cats), with_default(cat[ob], cats, V.CAT_TENSOR),
                        with_default(cat[pb], cats, V.CAT_TENSOR), with_default(cat[ob[si]], cats, V.CAT_TENSOR),
                        with_default(cat[c], cats, V.CAT_COUNTER)], order),
        "ph": strings([(np.where(is_x, 0, 1).astype(np.int32), ["X", "i"]), constant(n_o + n_n, "X"),
                       constant(n_c, "C")], order),
        "t_ns": t_ns[order],
        "dur_ns": np.concatenate([span_dur, ns(outer["end_ts"] - r.ts[ob]), ns(parts["end_ts"] - r.ts[pb]),
                                  s_dur, np.zeros(n_c, dtype="int64")])[order],
        "tensor": strings([(tensor[0][p], tensor[1]), (outer["aid"], r.aid_values), (parts["aid"], r.aid_values),
                           (outer["aid"][si], r.aid_values), (np.full(n_c, -1, dtype=np.int32), [])], order),
        "step": np.concatenate([r.step[p], r.step[ob], part_step, np.full(n_c, -1)])[order],
        "response": np.concatenate([r.resp[p], outer["resp"], part_resp, np.full(n_c, -1)])[order],
        "bytes": int_na(np.concatenate([bytes_[p], bytes_[ob], np.zeros(n_n + n_c, dtype="int64")])[order],
                        np.concatenate([bytes_ok[p], bytes_ok[ob], np.zeros(n_n + n_c, dtype=bool)])[order]),
        "value": np.concatenate([np.full(n_p + n_o + n_n, np.nan), value[c]])[order],
        "depth": depth[order],
    }
    import pandas as pd

    return pd.DataFrame(events, copy=False)  # a block per column: the merge of ranks pops them one by one


def _codes_at(cols, name, rows):
    codes, values = cols.codes(name)
    return codes[rows], values


def _depths(thread, ts, dur, inst):
    """Nesting depth of spans and instants on their thread (see viewer.tables_ringscope)."""
    from viewer.tables_ringscope import _depths as depths_loop

    return depths_loop(thread.tolist(), ts, dur, np.where(inst, "i", "X").tolist(), None)


def _fused(r, x, fused, rank):
    from viewer.fast_ringscope import Fallback

    cols = r.cols
    mem = r.named(x, V.MEMCPY_IN_FUSION_BUFFER, V.MEMCPY_OUT_FUSION_BUFFER)
    act = r.named(x, *V.COMM_ACTIVITIES)
    if len(fused) and (not r.resp_ok[mem].all() or not r.resp_ok[act].all()):
        raise Fallback("memcpy/activity spans without response ids")
    resp = r.resp[fused]
    mem_in, mem_out = {}, {}
    is_in = lut(r.names, lambda v: v == V.MEMCPY_IN_FUSION_BUFFER)[r.name[mem]].tolist()
    for into, rid, d in zip(is_in, r.resp[mem].tolist(), ns(r.dur[mem]).tolist()):
        into = mem_in if into else mem_out
        into[rid] = into.get(rid, 0) + d
    first_act = {}
    for i, rid in zip(act.tolist(), r.resp[act].tolist()):
        first_act.setdefault(rid, i)
    a_rows = [first_act.get(rid, -1) for rid in resp.tolist()]
    size_a = cols.floats("args.size")
    backend_codes, backends = cols.codes("args.backend")
    f_size = np.nan_to_num(size_a[fused], nan=0.0)
    tensors = [list(t) if t is not None else [] for t in cols.pylist("args.tensors", fused)]
    count, count_ok = cols.ints("args.count", 0)
    bytes_, _ = cols.ints("args.bytes", 0)
    thr, thr_ok = cols.ints("args.threshold", 0)
    op, ops = cols.codes("args.op")
    dt, dts = cols.codes("args.dtype")
    rows = {"activity": [], "comm_ns": [], "size": [], "backend": []}
    dur_ns = dict(zip(act.tolist(), ns(r.dur[act]).tolist()))
    for j, (i, a) in enumerate(zip(fused.tolist(), a_rows)):
        b = backends[backend_codes[i]] if backend_codes[i] >= 0 else None
        if a < 0:
            rows["activity"].append(None)
            rows["comm_ns"].append(0)
            rows["size"].append(int(f_size[j]))
            rows["backend"].append(b)
            continue
        rows["activity"].append(r.names[r.name[a]])
        rows["comm_ns"].append(dur_ns[a])
        rows["size"].append(int(f_size[j] if np.isnan(size_a[a]) else size_a[a]))
        rows["backend"].append(b if b is not None else (backends[backend_codes[a]] if backend_codes[a] >= 0
                                                        else None))
    return frames.build("fused_ops", {
        "rank": np.full(len(fused), rank, dtype="int32"), "response": resp,
        "step": r.step[fused], "op": [ops[c] if c >= 0 else None for c in op[fused].tolist()],
        "backend": rows["backend"], "activity": rows["activity"],
        "dtype": [dts[c] if c >= 0 else None for c in dt[fused].tolist()],
        "count": np.where(count_ok[fused], count[fused], [len(t) for t in tensors]).astype("int64"),
        "bytes": bytes_[fused], "threshold": int_na(thr[fused], thr_ok[fused]),
        "start_ns": ns(r.ts[fused]), "end_ns": ns(r.ts[fused] + r.dur[fused]),
        "memcpy_in_ns": [mem_in.get(rid, 0) for rid in resp.tolist()],
        "memcpy_out_ns": [mem_out.get(rid, 0) for rid in resp.tolist()],
        "comm_ns": rows["comm_ns"], "size": rows["size"], "tensors": tensors})


def _tensor_ops(r, outer, parts, fused, syncs, rank):
    if not len(outer["b"]):
        return frames.empty("tensor_ops")
    cols = r.cols
    ob, n = outer["b"], len(outer["b"])
    # each lifecycle's NEGOTIATE_* and QUEUE phase (the first of each, when several)
    po = parts["outer"]
    pname = r.name[parts["b"]]
    is_neg = lut(r.names, lambda v: v.startswith(V.NEGOTIATE_PREFIX))[pname]
    is_q = lut(r.names, lambda v: v == V.QUEUE)[pname]
    neg = lookup(np.where(is_neg, po, -2), np.arange(n))
    q = lookup(np.where(is_q, po, -2), np.arange(n))
    closed = np.append(parts["closed"], False)  # format 2 has no phase slices: -1 finds False
    neg_ok, q_ok = closed[neg], closed[q]
    p_end = ns(np.append(parts["end_ts"], 0.0))
    step = r.step[ob]
    m = outer["fused"]  # else the response it ran in
    resp = np.where(outer["resp_ok"], outer["resp"], np.where(m >= 0, r.resp[fused][np.maximum(m, 0)], -1)
                    if len(fused) else -1)
    neg_name = (np.where(neg >= 0, pname[np.maximum(neg, 0)] if len(pname) else -1, -1).astype(np.int32),
                [v[len(V.NEGOTIATE_PREFIX):] for v in r.names])
    op = coalesce((cols.codes("args.op")[0][ob], cols.codes("args.op")[1]), neg_name)
    oe = outer["e"]
    err_codes, errs = cols.codes("args.error")
    err = coalesce((np.where(oe >= 0, err_codes[np.maximum(oe, 0)], -1), errs), (err_codes[ob], errs))
    bytes_, bytes_ok = cols.ints("args.bytes", 0)
    ps, _ = cols.ints("args.process_set", 0)
    dtype = cols.codes("args.dtype")
    df = frames.build("tensor_ops", {
        "rank": np.full(n, rank, dtype="int32"), "tensor": strings([(outer["aid"], r.aid_values)]),
        "step": step, "occurrence": outer["k"], "op": strings([op]), "dtype": strings([(dtype[0][ob], dtype[1])]),
        "bytes": int_na(bytes_[ob], bytes_ok[ob]), "process_set": ps[ob].astype("int32"), "response": resp,
        "submit_ns": ns(r.ts[ob]),
        "negotiated_ns": int_na(np.where(neg_ok, p_end[neg], outer["neg_ns"]),
                                neg_ok | outer["neg_ok"]),
        "start_ns": int_na(np.where(q_ok, p_end[q], outer["start_ns"]),
                           q_ok | outer["start_ok"]),
        "done_ns": int_na(ns(outer["end_ts"]), outer["closed"] & (err[0] < 0)),
        "wait_ns": int_na(np.zeros(n, dtype="int64"), np.zeros(n, dtype=bool)), "error": strings([err])})
    if len(syncs):
        df["wait_ns"] = _waits(r, outer, step, syncs)
    return df


def _waits(r, outer, step, syncs):
    """Framework SYNCHRONIZE time per tensor op: by (tensor, step), else the latest op of that tensor
    submitted before the wait began (as viewer.tables_ringscope._attach_waits)."""
    import bisect

    cols = r.cols
    code_of = {v: i for i, v in enumerate(r.aid_values)}
    t_codes, t_vals = cols.codes("args.tensor")
    q_aid, q_step, q_ts, q_dur = [], [], [], []
    s_step = r.step[syncs].tolist()
    s_ts, s_dur = ns(r.ts[syncs]).tolist(), ns(r.dur[syncs]).tolist()
    no_tensor = [j for j, c in enumerate(t_codes[syncs].tolist()) if c < 0]
    lists = dict(zip(no_tensor, cols.pylist("args.tensors", syncs[no_tensor]))) if no_tensor else {}
    for j, c in enumerate(t_codes[syncs].tolist()):
        names = [t_vals[c]] if c >= 0 else list(lists.get(j) or [])
        for name in names:
            q_aid.append(code_of.get(name, -1))
            q_step.append(s_step[j])
            q_ts.append(s_ts[j])
            q_dur.append(s_dur[j])
    aid = outer["aid"].astype("int64")
    n = len(aid)
    q_aid, q_step = np.asarray(q_aid, dtype="int64"), np.asarray(q_step, dtype="int64")
    lo = int(min(step.min(initial=0), q_step.min(initial=0)))
    width = int(max(step.max(initial=0), q_step.max(initial=0))) - lo + 1
    if width * (len(r.aid_values) + 1) >= 1 << 62:
        from viewer.fast_ringscope import Fallback
        raise Fallback("step numbers out of range")
    hit = lookup(aid * width + (step - lo), np.where(q_step >= 0, q_aid * width + (q_step - lo), -1))
    hit = np.where((q_step >= 0) & (q_aid >= 0), hit, -1)
    miss = [j for j in np.flatnonzero(hit < 0).tolist() if q_aid[j] >= 0]
    if miss:  # the latest op of that tensor submitted at or before the wait
        submit = ns(r.ts[outer["b"]]).tolist()
        by_aid: dict = {}
        for i, a in enumerate(aid.tolist()):
            by_aid.setdefault(a, []).append((submit[i], i))
        for lst in by_aid.values():
            lst.sort()
        for j in miss:
            lst = by_aid.get(int(q_aid[j]), [])
            k = bisect.bisect_right(lst, (q_ts[j], n)) - 1
            if k >= 0:
                hit[j] = lst[k][1]
    ok = hit >= 0
    waits = np.zeros(n, dtype="int64")
    np.add.at(waits, hit[ok], np.asarray(q_dur, dtype="int64")[ok])
    has = np.zeros(n, dtype=bool)
    has[hit[ok]] = True
    return int_na(waits, has)


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


def _shutdown(r) -> dict:
    """Clock offsets and drop count from the last SHUTDOWN record ({} when the run did not close)."""
    from viewer.fast_ringscope import Fallback

    if not len(r.named(r.plain, V.SHUTDOWN)):
        return {}
    if r.cols.shutdown is None:  # Arrow saw one, the line search did not (an escaped name?)
        raise Fallback("SHUTDOWN record not found on its line")
    return dict(r.cols.shutdown)
