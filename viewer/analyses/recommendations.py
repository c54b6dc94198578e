"""Findings: each analysis result as a sentence with its numbers and a concrete action."""
from __future__ import annotations

from viewer.analyses.finding import COLUMNS, finding
from viewer.units import fmt_bytes, fmt_ns


def _why(causes, late_only: bool = True) -> dict:
    """``{rank: the root cause's sentence}`` for the late ranks (or every rank it named)."""
    if causes is None or not len(causes):
        return {}
    named = causes[causes["late"].astype(bool)] if late_only else causes
    return dict(zip(named["rank"].astype(int), named["message"]))


def _its(message: str, rank: int) -> str:
    """A root cause's sentence about ``rank``, said after "rank N:"."""
    own = f"rank {rank}'s "
    return "its " + message[len(own):] if message.startswith(own) else message


def _ranks_of(late_hosts) -> set:
    return {int(r) for rs in (late_hosts["ranks"] if late_hosts is not None and len(late_hosts) else []) for r in rs}


def straggler_findings(late, causes=None, late_hosts=None):
    """A rank flagged late (:func:`viewer.analyses.stragglers.late_ranks`), with why when the root
    cause analysis (:mod:`viewer.analyses.rootcause`) could tell. Ranks of a host late as a whole
    (``late_hosts``) are left to :func:`late_host_findings`: their host, not each rank, is the cause."""
    out = []
    if late is None or not len(late):
        return out
    why = _why(causes)
    on_late_host = _ranks_of(late_hosts)
    for _, r in late.iterrows():
        rank, share = int(r["rank"]), float(r["share_pct"])
        if rank in on_late_host:
            continue
        unit = "per step" if r["steps"] else "in total"
        msg = (f"rank {rank} was last in {r['pct_last']:.0f} % of negotiations and cost the others "
               f"{fmt_ns(r['per_step_ns'])} {unit}" + (f" ({share:.0f} % of the step)" if r["steps"] else ""))
        if rank in why:
            msg += "; " + why[rank]
        else:
            msg += (f"; median lateness {fmt_ns(r['median_lateness_ns'])}: look at what rank {rank} does before it "
                    "submits (data loading, host load, a slower device or extra work)")
        out.append(finding("straggler", "high" if share >= 10 or not r["steps"] else "medium", 50 + share, msg))
    return out


def late_host_findings(late_hosts, late=None, causes=None):
    """A host whose ranks were all late together (:func:`viewer.analyses.stragglers.late_hosts`): the
    host is the cause (its load, disk, network or clock), so it is named once, with the ranks that the
    straggler rule flagged on it and what the root-cause analysis said about them."""
    out = []
    if late_hosts is None or not len(late_hosts):
        return out
    flagged = set() if late is None or not len(late) else {int(r) for r in late["rank"]}
    why = _why(causes, late_only=False)
    for _, h in late_hosts.iterrows():
        ranks, share = [int(r) for r in h["ranks"]], float(h["share_pct"])
        unit = "per step" if h["steps"] else "in total"
        msg = (f"all {len(ranks)} ranks of host {h['host']} (ranks {', '.join(map(str, ranks))}) were late "
               f"together: the host was ready after every rank of the other hosts in {h['pct_last']:.0f} % of "
               f"negotiations, {fmt_ns(h['median_lead_ns'])} after them at the median, and cost the others "
               f"{fmt_ns(h['per_step_ns'])} {unit}" + (f" ({share:.0f} % of the step)" if h["steps"] else "")
               + "; the other hosts' ranks were not")
        named = [r for r in ranks if r in flagged]
        if named:
            msg += f"; on its own the straggler rule would flag rank(s) {', '.join(map(str, named))}"
        msg += "".join(f"; rank {r}: {_its(why[r], r)}" for r in ranks if r in why)
        unc = h["clock_uncertainty_ns"]
        doubt = unc is not None and unc == unc and float(h["median_lead_ns"]) <= 2 * float(unc)
        if doubt:
            msg += (f"; that lead is within twice the host's clock-offset uncertainty (±{fmt_ns(unc)}), so "
                    "part of it may be the hosts' clocks disagreeing rather than the host being late")
        msg += (f": look at host {h['host']} as a whole (its load, data loading from its disks or network, "
                "CPU frequency, other jobs on it) rather than at one rank")
        sev = "medium" if doubt or share < 10 and h["steps"] else "high"
        out.append(finding("late_host", sev, 52 + share, msg))
    return out


def slow_link_findings(ops, cost, fusion_summary=None, ab=None, prefix="RINGSCOPE_", hierarchical=False):
    """The cross-host link bounds the step: its collectives left the framework waiting for at least
    20 % of the step (median over ranks). Names the link's busbw and that share, and the remedy the
    figures point at: mostly small, latency-bound ops (under the α-β fit's n½, else 1 MiB) -> fuse
    more (the threshold when ops fill it, else the cycle time); large ops on a flat ring with several
    ranks per host -> hierarchical allreduce (and by how much it cuts each host link's bytes);
    otherwise the link itself is the limit.

    Args:
        ops: :func:`viewer.analyses.links.link_ops`; cost: :func:`viewer.analyses.links.cross_link_cost`;
        fusion_summary: :func:`viewer.analyses.fusion.fusion_summary`; ab: the α-β fit;
        hierarchical: the run asked for hierarchical allreduce.
    """
    if ops is None or not len(ops) or cost is None or not len(cost):
        return []
    share = float(cost["share_pct"].median())
    if share < 20:
        return []
    cross = ops[ops["link"] == "cross"]
    bus = (cross["busbw_gbps"] * cross["time_ns"]).sum() / cross["time_ns"].sum()
    big = cross[cross["op_bytes"] >= cross["op_bytes"].max() / 2]
    small_cut = _latency_bound_below(ab)
    small = cross[cross["op_bytes"] < small_cut]
    small_time = float(small["time_ns"].sum() / cross["time_ns"].sum())
    per_step = float(cost["exposed_cross_ns"].median())
    msg = (f"the cross-host link bounds the step: collectives crossing hosts ran at {8 * bus:.2f} Gbit/s busbw "
           f"({bus:.3f} GB/s; {8 * float(big['busbw_gbps'].median()):.2f} Gbit/s on the largest, "
           f"{fmt_bytes(big['op_bytes'].median())} ops) and left the ranks waiting {fmt_ns(per_step)} per step, "
           f"{share:.0f} % of the step")
    msg += "; " + _slow_link_remedy(cross, small, small_time, small_cut, fusion_summary, prefix, hierarchical)
    return [finding("slow_link", "high" if share >= 40 else "medium", 55 + share / 2, msg)]


def _latency_bound_below(ab) -> float:
    if ab is not None and len(ab):
        ok = ab[(ab["op"] == "ALLREDUCE") & (ab["r2"] >= 0.8) & (ab["half_bw_bytes"] > 0)]
        if len(ok):
            return float(ok["half_bw_bytes"].max())
    return float(1 << 20)


def _slow_link_remedy(cross, small, small_time, small_cut, fus, prefix, hierarchical) -> str:
    steps = cross.loc[cross["step"] >= 0, "step"].nunique()
    per_step = small["response"].nunique() / steps if steps else 0.0
    if small_time >= 0.5 and per_step >= 4:   # several latency-bound collectives a step: one would do
        what = (f"{small_time * 100:.0f} % of that link time went to {per_step:.0f} ops per step under "
                f"{fmt_bytes(small_cut)} (median {fmt_bytes(small['op_bytes'].median())}), each paying the "
                "link's latency")
        s = fus.iloc[0] if fus is not None and len(fus) else None
        if s is not None and s["full_pct"] == s["full_pct"] and s["full_pct"] >= 25:
            return (what + f": raise {prefix}FUSION_THRESHOLD (now {fmt_bytes(s['threshold'])}, filled by "
                    f"{s['full_pct']:.0f} % of ops) so fewer, larger collectives cross it")
        thr = "" if s is None or s["threshold"] != s["threshold"] else \
            f" (ops fill {100 * s['median_fill']:.1f} % of the {fmt_bytes(s['threshold'])} threshold at the median)"
        return what + (f": fuse more per cycle{thr}: raise {prefix}CYCLE_TIME so fewer, larger collectives "
                       "cross it")
    flat = cross[cross["algorithm"] == "ring"]
    if not hierarchical and len(flat):
        n, c = int(flat["ranks"].max()), int(flat["hosts"].max())
        if n > c:
            # bytes over one host's link per byte of buffer: the ring's crossing hops shared by the hosts,
            # against 2(c-1)/c when every local rank's shard crosses (docs/MULTIHOST.md)
            now = float((flat["traffic_bytes"] / (c * flat["op_bytes"])).median())
            then = 2 * (c - 1) / c
            return (f"most of it went to large ops on a flat ring of {n} ranks over {c} hosts: run hierarchical "
                    f"allreduce ({prefix}HIERARCHICAL_ALLREDUCE=1, or ringscope run --hierarchical-allreduce), "
                    f"which sends {then:.2g}x each buffer's size over a host's link instead of {now:.2g}x "
                    f"({now / then:.2g}x less)")
    return ("fusing or regrouping cannot cut it much: the link itself is the limit, so a faster link between "
            "hosts or fewer bytes (fp16 gradients) would")


def imbalance_findings(causes, late_hosts=None):
    """A rank not flagged late whose phase is far longer than the others' (root cause, ``late`` False);
    on a host late as a whole, :func:`late_host_findings` says it."""
    if causes is None or not len(causes):
        return []
    skip = _ranks_of(late_hosts)
    others = causes[~causes["late"].astype(bool) & ~causes["rank"].astype(int).isin(skip)]
    return [finding("phase_imbalance", "high" if r["share_pct"] >= 10 else "medium", 45 + min(r["share_pct"], 50),
                    r["message"]) for _, r in others.iterrows()]


def fusion_findings(summary, prefix="RINGSCOPE_"):
    """Threshold-bound fusion (raise it) and starved fusion (tiny single-tensor ops)."""
    out = []
    if summary is None or not len(summary):
        return out
    s = summary.iloc[0]
    thr = s["threshold"]
    full = s["full_pct"] == s["full_pct"] and (
        s["full_pct"] >= 50 or (s["full_pct"] >= 25 and s["median_fill"] >= 0.5))
    if s["ops"] >= 3 and full:
        out.append(finding("fusion_threshold", "high" if s["full_pct"] >= 40 else "medium", 30 + s["full_pct"] / 5,
                           f"{s['full_pct']:.0f} % of {int(s['ops'])} fused ops filled the {fmt_bytes(thr)} "
                           f"threshold (median fill {100 * s['median_fill']:.0f} %, {s['mean_tensors_per_op']:.1f} "
                           f"tensors per op): raise {prefix}FUSION_THRESHOLD (e.g. to "
                           f"{fmt_bytes(max(thr * 4, 8 << 20))}) so fewer, larger collectives run"))
    if s["ops"] >= 3 and s["mean_tensors_per_op"] <= 1.5 and s["median_bytes"] < 256 * 1024:
        fill = f", {100 * s['median_fill']:.2f} % of the {fmt_bytes(thr)} threshold" if thr == thr else ""
        out.append(finding("fusion_starved", "high", 45,
                           f"fusion is starved: {s['single_tensor_pct']:.0f} % of {int(s['ops'])} ops carried a "
                           f"single tensor (median {fmt_bytes(s['median_bytes'])} per op{fill}); each pays the "
                           f"full collective latency: raise {prefix}CYCLE_TIME so more tensors are fused per "
                           "cycle, or bucket small gradients before submitting"))
    if s["ops"] >= 3 and s["memcpy_share"] >= 0.15:
        out.append(finding("memcpy", "medium", 25 + 50 * s["memcpy_share"],
                           f"copies into and out of the fusion buffer took {100 * s['memcpy_share']:.0f} % of "
                           "fused-op time: use fewer, larger tensors or a backend that reduces in place"))
    return out


def bandwidth_findings(by_size, ab, peak):
    """Latency-bound traffic and large messages far below the best (or given peak) bandwidth."""
    out = []
    if ab is not None and len(ab):
        for _, r in ab.iterrows():
            if r["half_bw_bytes"] == r["half_bw_bytes"] and r["ops"] >= 5 and r["op"] == "ALLREDUCE" \
                    and r["r2"] == r["r2"] and r["r2"] >= 0.8:
                out.append(finding("alpha_beta", "info", 10,
                                   f"{r['backend']} {r['op'].lower()}: latency α ≈ {r['alpha_us']:.0f} µs, bandwidth "
                                   f"β ≈ {r['beta_gbps']:.2f} GB/s; messages under {fmt_bytes(r['half_bw_bytes'])} "
                                   "are latency-bound, so fuse them into larger ones"))
    if by_size is not None and len(by_size) and peak:
        big = by_size.iloc[-1]
        if big["efficiency"] == big["efficiency"] and big["efficiency"] < 0.6:
            out.append(finding("bandwidth", "medium", 30,
                               f"{fmt_bytes(big['size_bytes'])}+ messages reached {big['busbw_gbps']:.2f} GB/s bus "
                               f"bandwidth, {100 * big['efficiency']:.0f} % of the {peak:g} GB/s peak: check the "
                               "interconnect and the backend choice"))
    return out


def breakdown_findings(bd_rank):
    """Communication left exposed on the critical path."""
    out = []
    if bd_rank is None or not len(bd_rank):
        return out
    worst = bd_rank.sort_values("exposed_pct", ascending=False).iloc[0]
    if worst["exposed_pct"] >= 20 and worst["step_ns"] > 0:
        out.append(finding("exposed", "medium", 20 + worst["exposed_pct"] / 5,
                           f"communication was exposed for {worst['exposed_pct']:.0f} % of each step on rank "
                           f"{int(worst['rank'])} ({fmt_ns(worst['exposed_ns'])} of {fmt_ns(worst['step_ns'])}), "
                           f"overlapped {fmt_ns(worst['overlapped_ns'])}: submit gradients as soon as they are "
                           "ready (backward hooks) and synchronize as late as possible"))
    return out


def hang_findings(by_rank, hang_df, truncated_ranks, ends=None):
    """A rank that died (its trace stopped first), missing ranks (a hang), and cut traces.

    ``ends``: :func:`viewer.analyses.hangs.rank_ends` (where each trace stops, closed or not)."""
    from viewer.analyses import hangs

    out = []
    dead = hangs.stopped_first(ends) if ends is not None else None
    if dead is not None:
        out.append(finding("rank_died", "high", 100, _died_message(dead, ends, hang_df)))
    if by_rank is not None and len(by_rank) and (dead is None or int(by_rank.iloc[0]["rank"]) != dead["rank"]):
        missing = hang_df[hang_df["kind"] == "missing"]
        root = by_rank.iloc[0]  # the earliest tensor someone never submitted
        step = f" (step {int(root['first_step'])})" if root["first_step"] >= 0 else ""
        first = missing.sort_values("first_submit_ns").iloc[0]
        waiting = ", ".join(map(str, root["waiting_ranks"])) or "the others"
        msg = (f"rank {int(root['rank'])} never submitted {root['names'][0]}{step}"
               + (f" and {int(root['tensors']) - 1} more" if root["tensors"] > 1 else "")
               + f"; rank(s) {waiting} waited {fmt_ns(first['waited_ns'])} for it" + _failed(first))
        later = by_rank.iloc[1:]
        if len(later):
            msg += (f"; after that rank(s) {', '.join(str(int(r)) for r in later['rank'])} never submitted "
                    f"{int(later['tensors'].max())} tensor(s) that rank {int(root['rank'])} went on to submit "
                    "(it ran ahead)")
        out.append(finding("hang", "high", 95, msg + f": check rank {int(root['rank'])}'s control flow (a "
                           "skipped collective, a different model branch or an exception)"))
    together = hangs.cut_together(ends) if ends is not None else None
    if together is not None:
        lo, hi = together
        out.append(finding("truncated", "medium", 40,
                           f"all {len(ends)} traces stop unclosed within {fmt_ns(hi - lo)} of each other "
                           f"({fmt_ns(lo)} to {fmt_ns(hi)} into the run): the whole job was killed at once, as "
                           "mpiexec does to every rank when one dies; each rank lost what it had not yet "
                           "written, so these traces cannot tell which rank failed first (the launcher's output "
                           "names the process) and incomplete tensors at the very end are not a hang"))
    elif truncated_ranks and dead is None:
        out.append(finding("truncated", "medium", 40,
                           f"trace(s) of rank(s) {', '.join(map(str, truncated_ranks))} stopped mid-run (not "
                           "closed): the process crashed or was killed; the analyses cover what was recorded"))
    return out


def _failed(row) -> str:
    return ", until the stall shutdown failed it" if bool(row.get("failed", False)) else ""


def _died_message(dead, ends, hang_df) -> str:
    r = dead["rank"]
    others = ends[ends["rank"] != r]
    msg = (f"rank {r} stopped first: its trace ends {fmt_ns(dead['last_ns'])} into the run, "
           f"{fmt_ns(dead['lead_ns'])} before any other rank's, and was not closed (the process was killed "
           "or crashed)")
    waits = hang_df[[r not in s for s in hang_df["submitted_ranks"]]] if len(hang_df) else hang_df
    if len(waits):
        first = waits.sort_values("first_submit_ns").iloc[0]
        step = f" (step {int(first['step'])})" if first["step"] >= 0 else ""
        more = f" and {len(waits) - 1} more" if len(waits) > 1 else ""
        waiting = ", ".join(map(str, first["submitted_ranks"]))
        msg += (f"; rank(s) {waiting} waited {fmt_ns(first['waited_ns'])} for it on {first['tensor']}{step}"
                f"{more}{_failed(first)}")
    else:
        msg += f"; rank(s) {', '.join(map(str, others['rank']))} went on without it"
    return msg + f": find why rank {r}'s process ended (out of memory, a signal, its own log)"


def findings(run, peak_busbw_gbps=None):
    """All findings of a :class:`viewer.Run`, most important first.

    Args:
        run: a loaded :class:`viewer.Run`; peak_busbw_gbps: optional link peak (GB/s).
    Returns:
        DataFrame ``kind, severity, score, message``.
    """
    import pandas as pd

    from viewer.analyses import breakdown, fusion, hangs, priorities, recoveries

    bd = run.breakdown()
    bd_rank = breakdown.breakdown_by_rank(bd)
    hang_df = run.hangs()
    rows = []
    rows += hang_findings(hangs.hangs_by_rank(hang_df), hang_df, run.meta.get("truncated_ranks") or [],
                          hangs.rank_ends(run.tables))
    rows += late_host_findings(run.late_hosts(), run.late_ranks(), run.root_causes())
    rows += recoveries.recovery_findings(run.recoveries())
    rows += straggler_findings(run.late_ranks(), run.root_causes(), run.late_hosts())
    rows += imbalance_findings(run.root_causes(), run.late_hosts())
    fill = run.fusion()
    fill = fill[fill["op"] == "ALLREDUCE"]  # broadcasts and the like are not fused
    prefix = "HOROVOD_" if str(run.meta.get("format", "")).startswith("horovod") else "RINGSCOPE_"
    rows += fusion_findings(fusion.fusion_summary(fill), prefix)
    rows += breakdown_findings(bd_rank)
    rows += priorities.priority_findings(priorities.waits_behind_lower(run.tensor_ops, run.fused_ops))
    rows += bandwidth_findings(run.bandwidth_by_size(peak_busbw_gbps), run.alpha_beta(), peak_busbw_gbps)
    rows += slow_link_findings(run.links(), run.cross_link_cost(), fusion.fusion_summary(fill), run.alpha_beta(),
                               prefix, bool(run.meta.get("hierarchical_allreduce")))
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.sort_values("score", ascending=False, ignore_index=True)
