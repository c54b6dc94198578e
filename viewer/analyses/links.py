"""Intra-host and cross-host links: what each kind carried, how fast, and its cost (docs/MULTIHOST.md)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracer import vocab as V
from viewer.analyses import intervals

OP_COLUMNS = ["response", "step", "op_bytes", "link", "algorithm", "phase", "ranks", "hosts", "traffic_bytes",
              "time_ns", "busbw_gbps"]
SIZE_COLUMNS = ["size_bytes", "link", "phase", "ops", "traffic_bytes", "time_us", "busbw_gbps", "busbw_max_gbps"]
COST_COLUMNS = ["rank", "host", "steps", "step_ns", "cross_ns", "exposed_cross_ns", "share_pct"]
INTRA, CROSS = "intra", "cross"


def hosts_of(ranks) -> dict[int, str]:
    """``{rank: host}`` for the ranks whose trace names a host."""
    return {int(r): h for r, h in zip(ranks["rank"], ranks["host"]) if isinstance(h, str) and h}


def ring_hops(hosts: list[str]) -> tuple[int, int]:
    """(intra, cross) hops of a ring over ranks whose hosts are ``hosts`` in ring order."""
    n = len(hosts)
    cross = sum(hosts[i] != hosts[(i + 1) % n] for i in range(n)) if n > 1 else 0
    return n - cross, cross


def _empty(cols):
    return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})


def link_ops(tables):
    """``OP_COLUMNS`` per collective and link kind (``time_ns``: the ranks' shortest span: the transfer)."""
    host = hosts_of(tables.ranks)
    if len(set(host.values())) < 2:
        return _empty(OP_COLUMNS)
    ev = tables.events_without_ops
    names = ev["name"]
    sub = ev[names.isin(V.HIERARCHICAL_SUBPHASES).to_numpy(dtype=bool, na_value=False)]
    hier = set(zip(sub["rank"].tolist(), sub["response"].tolist()))
    ring_sub = ev[(names == V.RING_REDUCE_SCATTER).to_numpy(dtype=bool, na_value=False)]
    ringed = set(zip(ring_sub["rank"].tolist(), ring_sub["response"].tolist()))
    size = int(tables.meta.get("size") or 0)
    local = {int(r): int(k) for r, k in zip(tables.ranks["rank"], tables.ranks["local_rank"]) if pd.notna(k)}
    rows = _flat_rows(tables.fused_ops, host, hier, ringed, size) + _hier_rows(sub, host, local)
    if not rows:
        return _empty(OP_COLUMNS)
    return pd.DataFrame(rows, columns=OP_COLUMNS).sort_values(["response", "link", "phase"], ignore_index=True)


def _row(response, step, s, link, algorithm, phase, ranks, hosts, traffic, t, bus_bytes) -> dict:
    busbw = bus_bytes / t if t > 0 else float("nan")   # bytes/ns = GB/s
    return dict(zip(OP_COLUMNS, (response, step, s, link, algorithm, phase, ranks, hosts, traffic, t, busbw)))


def _flat_rows(fused, host, hier, ringed, size: int) -> list[dict]:
    fo = fused[(fused["activity"] == V.RING_ALLREDUCE) & (fused["op"] == V.ALLREDUCE) & (fused["bytes"] > 0)]
    if not len(fo):
        return []
    fo = fo.sort_values(["response", "rank"], kind="stable")
    key = pd.MultiIndex.from_arrays([fo["rank"].astype("int64"), fo["response"].astype("int64")])
    fo = fo.assign(hier=key.isin(list(hier)) if hier else False, ring=key.isin(list(ringed)) if ringed else False)
    agg = fo.groupby("response", sort=True).agg(
        n=("rank", "size"), size=("size", "max"), s=("bytes", "max"), t=("comm_ns", "min"), step=("step", "max"),
        hier=("hier", "any"), ring=("ring", "any"))
    ranks = fo["rank"].astype("int64").tolist()
    ends = np.cumsum(agg["n"].to_numpy()).tolist()
    split: dict = {}   # participants -> (hosts in ring order, or None when a host is unknown)
    rows = []
    for a, end, r in zip([0, *ends[:-1]], ends, agg.itertuples()):
        parts = tuple(ranks[a:end])
        n = len(parts)
        if n < 2 or n != (int(r.size) or size) or r.hier:
            continue   # a participant's trace is missing, or it ran hierarchically
        if parts not in split:
            split[parts] = [host[p] for p in parts] if all(p in host for p in parts) else None
        hs = split[parts]
        if hs is None or len(set(hs)) < 2:
            continue
        s, t = int(r.s), int(r.t)
        if r.ring:
            intra_hops, cross_hops = ring_hops(hs)
            per_hop = 2.0 * (n - 1) / n * s
            traffic = {INTRA: intra_hops * per_hop, CROSS: cross_hops * per_hop}
        else:
            same = sum(hs.count(h) ** 2 for h in set(hs))
            traffic = {INTRA: float(s * (same - n)), CROSS: float(s * (n * n - same))}
        rows += [_row(int(r.Index), int(r.step), s, link, "ring" if r.ring else "direct", V.RING_ALLREDUCE, n,
                      len(set(hs)), int(b), t, 2.0 * (n - 1) / n * s) for link, b in traffic.items() if b > 0]
    return rows


def _hier_rows(sub, host, local) -> list[dict]:
    """Rows of hierarchical allreduces: (L-1)·S within a host of L ranks, 2(H-1)·S across H hosts."""
    rows = []
    sub = sub[sub["rank"].isin(list(host)) & sub["bytes"].notna()]
    for (resp, phase), g in sub.groupby(["response", "name"], sort=True):
        on = g.assign(host=[host[int(r)] for r in g["rank"]])
        n_hosts = on["host"].nunique()
        step = int(g["step"].max())
        if phase == V.CROSS_HOST_ALLREDUCE:
            if n_hosts < 2:
                continue
            s = int(on["bytes"].sum()) // n_hosts   # a host's shards add up to the buffer
            # each shard's ring ends when its last rank joined and it finished; the step, with the slowest
            ring = [local.get(int(r), 0) for r in on["rank"]]
            t = int(on.assign(ring=ring).groupby("ring")["dur_ns"].min().max())
            rows.append(_row(int(resp), step, s, CROSS, "hierarchical", phase, len(on), n_hosts,
                             2 * (n_hosts - 1) * s, t, 2.0 * (n_hosts - 1) / n_hosts * s))
        else:
            s = int(on["bytes"].max())
            per_host = on.groupby("host")
            # hosts work in parallel; within one, the rank that joined last waited least
            t = int(per_host["dur_ns"].min().max())
            sizes = per_host.size()
            most = int(sizes.max())
            rows.append(_row(int(resp), step, s, INTRA, "hierarchical", phase, len(on), n_hosts,
                             int(sum((k - 1) * s for k in sizes)), t, (most - 1) / most * s))
    return rows


def by_size(ops):
    """``SIZE_COLUMNS`` of :func:`link_ops` per power-of-two op size, link kind and phase (medians)."""
    if ops is None or not len(ops):
        return _empty(SIZE_COLUMNS)
    bucket = (2 ** np.floor(np.log2(ops["op_bytes"].astype("float64")))).astype("int64")
    g = ops.assign(size_bytes=bucket).groupby(["size_bytes", "link", "phase"])
    out = g.agg(ops=("response", "size"), traffic_bytes=("traffic_bytes", "sum"), time_us=("time_ns", "median"),
                busbw_gbps=("busbw_gbps", "median"), busbw_max_gbps=("busbw_gbps", "max")).reset_index()
    out["time_us"] = out["time_us"] / 1000.0
    return out[SIZE_COLUMNS]


def _cross_spans(tables, ops, host) -> dict[int, list[tuple[int, int]]]:
    """Per rank: its cross-host RING_ALLREDUCE spans and its host's CROSS_HOST_ALLREDUCE spans."""
    ev = tables.events_without_ops
    cross = ops[ops["link"] == CROSS]
    flat = set(cross.loc[cross["algorithm"] != "hierarchical", "response"].tolist())
    out: dict[int, list[tuple[int, int]]] = {}
    m = ((ev["name"] == V.RING_ALLREDUCE) & (ev["depth"] == 0) & ev["response"].isin(flat)).to_numpy(
        dtype=bool, na_value=False)
    for r, s, d in zip(ev["rank"][m].tolist(), ev["t_ns"][m].tolist(), ev["dur_ns"][m].tolist()):
        out.setdefault(int(r), []).append((s, s + d))
    m = (ev["name"] == V.CROSS_HOST_ALLREDUCE).to_numpy(dtype=bool, na_value=False)
    by_host: dict[str, list[tuple[int, int]]] = {}
    for r, s, d in zip(ev["rank"][m].tolist(), ev["t_ns"][m].tolist(), ev["dur_ns"][m].tolist()):
        if int(r) in host:
            by_host.setdefault(host[int(r)], []).append((s, s + d))
    for r, h in host.items():
        out.setdefault(r, []).extend(by_host.get(h, []))
    return {r: v for r, v in out.items() if v}


def cross_link_cost(tables, ops):
    """``COST_COLUMNS`` per rank, means per step: the link's busy time and how much of it was waited for."""
    host = hosts_of(tables.ranks)
    if ops is None or not len(ops) or not (ops["link"] == CROSS).any():
        return _empty(COST_COLUMNS)
    spans = _cross_spans(tables, ops, host)
    ev = tables.events_without_ops
    fw = ev[((ev["thread"] == "framework") & (ev["ph"] == "X")
             & ev["name"].isin([V.STEP, V.SYNCHRONIZE])).to_numpy(dtype=bool, na_value=False)]
    rows = []
    by_rank = dict(tuple(fw.groupby("rank")))
    for rank, cross in sorted(spans.items()):
        mine = by_rank.get(rank, fw.iloc[:0])
        steps = mine[(mine["name"] == V.STEP) & (mine["step"] >= 0)]
        windows = list(zip(steps["t_ns"], steps["t_ns"] + steps["dur_ns"]))
        if not windows:
            r_ev = tables.events[tables.events["rank"] == rank]   # every row of the rank
            windows = [(int(r_ev["t_ns"].min()), int((r_ev["t_ns"] + r_ev["dur_ns"]).max()))]
        syncs = mine[mine["name"] == V.SYNCHRONIZE]
        cross = intervals.merge(cross)
        exposed = intervals.intersection(cross, zip(syncs["t_ns"], syncs["t_ns"] + syncs["dur_ns"]))
        w0, w1 = (np.array(w, dtype="int64") for w in zip(*windows))
        k = len(windows)
        step_ns = float((w1 - w0).sum())
        busy = float((intervals.covered_before(cross, w1) - intervals.covered_before(cross, w0)).sum())
        waited = float((intervals.covered_before(exposed, w1) - intervals.covered_before(exposed, w0)).sum())
        rows.append({"rank": rank, "host": host.get(rank), "steps": len(steps), "step_ns": step_ns / k,
                     "cross_ns": busy / k, "exposed_cross_ns": waited / k,
                     "share_pct": 100.0 * waited / step_ns if step_ns > 0 else 0.0})
    return pd.DataFrame(rows, columns=COST_COLUMNS)
