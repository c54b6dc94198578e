"""Each tensor op's negotiation and QUEUE, rebuilt from the first FUSED_RESPONSE listing it within [submit, done]."""
from __future__ import annotations

import numpy as np

from tracer import vocab as V
from viewer.io.columns import ns


def attach(r, ops, fused) -> None:
    """Add to ``ops`` the response each ran in (``fused``) and its ``neg_ns``/``neg_ok``, ``start_ns``/``start_ok``."""
    n = len(ops["b"])
    match = _match(r, ops, fused)
    start_ok = match >= 0
    start = np.zeros(n, dtype="int64")
    neg_ok = np.zeros(n, dtype=bool)
    if len(fused):
        m = np.maximum(match, 0)
        start = np.where(start_ok, ns(r.ts[fused])[m], 0)
        q, q_ok = r.cols.ints("args." + V.ARG_QUEUE_NS, 0)
        neg_ok = start_ok & q_ok[fused][m]
        neg = np.where(neg_ok, start - q[fused][m], 0)
        early = neg_ok & (neg < ns(r.ts[ops["b"]]))   # arrived before a tensor of it was submitted
        if early.any():
            bad = np.unique(match[early])
            r.damage(fused[bad], "'args.queue_ns' puts the response before its tensors' submission "
                                 "(its negotiation and QUEUE phases left out)", 0)
            neg_ok &= ~np.isin(match, bad)
    else:
        neg = np.zeros(n, dtype="int64")
    # failed before any response: the negotiation lasted until the failure
    oe = ops["e"]
    err = r.cols.codes("args." + V.ARG_ERROR)[0]
    failed = (oe >= 0) & (err[np.maximum(oe, 0)] >= 0) if len(err) else np.zeros(n, dtype=bool)
    cut = (match < 0) & ops["closed"] & failed
    neg = np.where(cut, ns(ops["end_ts"]), neg)
    neg_ok = neg_ok | cut
    ops.update(fused=match, neg_ns=neg, neg_ok=neg_ok, start_ns=start, start_ok=start_ok)


def _match(r, ops, fused) -> np.ndarray:
    n = len(ops["b"])
    out = np.full(n, -1, dtype="int64")
    if not n or not len(fused):
        return out
    aid, pos = r.cols.listed("args." + V.ARG_TENSORS, fused, r.aid_values)
    keep = aid >= 0
    aid, pos = aid[keep], pos[keep]
    if not len(aid):
        return out
    f_start = ns(r.ts[fused])[pos]
    o_aid = ops["aid"].astype("int64")
    # times replaced by their rank among all times, so (tensor, time) fits one int64 key
    times, rank = np.unique(np.concatenate([f_start, ns(r.ts[ops["b"]])]), return_inverse=True)
    rank = rank.reshape(-1)
    width = len(times) + 1
    key = aid * width + rank[:len(aid)]
    order = np.lexsort((pos, key))      # by tensor, start, then file order (the first wins a tie)
    j = np.searchsorted(key[order], o_aid * width + rank[len(aid):], side="left")
    hit = order[np.minimum(j, len(order) - 1)]
    ok = (j < len(order)) & (aid[hit] == o_aid)
    ok &= ~ops["closed"] | (f_start[hit] <= ns(ops["end_ts"]))
    return np.where(ok, pos[hit], -1)


def rebuilt_rows(r, ops, op):
    """The NEGOTIATE_<OP> and QUEUE slices: ``(idx into ops, (name codes, names), t_ns, dur_ns)``."""
    sel = np.flatnonzero(ops["neg_ok"] & ops["start_ok"])
    op_codes, op_values = op
    negs = np.flatnonzero(ops["neg_ok"])
    sel_n = negs[op_codes[negs] >= 0]
    submit = ns(r.ts[ops["b"]])
    neg, start = ops["neg_ns"], ops["start_ns"]
    idx = np.concatenate([sel_n, sel])
    names = ([V.negotiate_name(v) for v in op_values] + [V.QUEUE])
    codes = np.concatenate([op_codes[sel_n], np.full(len(sel), len(op_values))]).astype(np.int32)
    t_ns = np.concatenate([submit[sel_n], neg[sel]])
    dur = np.concatenate([neg[sel_n] - submit[sel_n], start[sel] - neg[sel]])
    return idx, (codes, names), t_ns, dur
