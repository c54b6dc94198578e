"""Findings about a Horovod-style runtime's work; their advice names its settings (RINGSCOPE_* or HOROVOD_*)."""
from __future__ import annotations

from viewer import units
from viewer.analyses.communication import credible
from viewer.findings.rule import finding, most_exposed, optional, rule, step_window


def _prefix(run) -> str:
    return "RINGSCOPE_" if "ringscope" in run.has else "HOROVOD_"


@rule("runtime", "collectives", unless=("ddp",))
def fusion(run, peak=None):
    """Threshold-bound fusion (raise it), starved fusion (tiny single-tensor ops), costly copies."""
    summary, prefix, out = run.fusion(), _prefix(run), []
    if not len(summary) or summary.iloc[0]["ops"] < 3:
        return out
    s = summary.iloc[0]
    thr = s["threshold"]
    full = s["full_pct"] == s["full_pct"] and (s["full_pct"] >= 50 or (s["full_pct"] >= 25 and s["median_fill"] >= 0.5))
    if full:
        out.append(finding(
            "fusion_threshold", "high" if s["full_pct"] >= 40 else "medium", 30 + s["full_pct"] / 5,
            f"fusion is capped: {s['full_pct']:.0f} % of fused ops filled the {units.size(thr)} threshold",
            f"{s['full_pct']:.0f} % of {int(s['ops'])} fused ops filled the {units.size(thr)} threshold (median fill "
            f"{100 * s['median_fill']:.0f} %, {s['mean_tensors_per_op']:.1f} tensors per op): raise "
            f"{prefix}FUSION_THRESHOLD (e.g. to {units.size(max(thr * 4, 8 << 20))}) so fewer, larger collectives run",
            metric="full_pct", value=s["full_pct"], unit="pct"))
    if s["mean_tensors_per_op"] <= 1.5 and s["median_bytes"] < 256 * 1024:
        fill = f", {100 * s['median_fill']:.2f} % of the {units.size(thr)} threshold" if thr == thr else ""
        out.append(finding(
            "fusion_starved", "high", 45,
            f"fusion is starved: {s['single_tensor_pct']:.0f} % of ops carried a single tensor",
            f"fusion is starved: {s['single_tensor_pct']:.0f} % of {int(s['ops'])} ops carried a single tensor "
            f"(median {units.size(s['median_bytes'])} per op{fill}); each pays the full collective latency: raise "
            f"{prefix}CYCLE_TIME so more tensors are fused per cycle, or bucket small gradients before submitting",
            metric="single_tensor_pct", value=s["single_tensor_pct"], unit="pct"))
    if s["memcpy_share"] >= 0.15:
        title = f"copies into and out of the fusion buffer took {100 * s['memcpy_share']:.0f} % of fused-op time"
        out.append(finding("memcpy", "medium", 25 + 50 * s["memcpy_share"], title,
                           title + ": use fewer, larger tensors or a backend that reduces in place",
                           metric="memcpy_share", value=s["memcpy_share"], unit="ratio"))
    return out


@rule("runtime", "steps", unless=("ddp",))
def exposed(run, peak=None):
    """Communication the framework waited on, on the rank where it was the largest share of the step."""
    worst = most_exposed(run)
    if worst is None:
        return []
    pct, rank, w, step = worst
    return [finding(
        "exposed", "medium", 20 + pct / 5, f"communication was exposed for {pct:.0f} % of the step on rank {rank}",
        f"communication was exposed for {pct:.0f} % of each step on rank {rank} "
        f"({units.duration(w['exposed_comm_ns'])} of {units.duration(w['step_ns'])} waiting on it), overlapped "
        f"{units.duration(w['overlapped_ns'])}: submit gradients as soon as they are ready (backward hooks) and "
        "synchronize as late as possible", ranks=[rank], steps=[step],
        window=step_window(run, step, [rank]), metric="exposed_comm_pct", value=pct, unit="pct")]


@rule("ringscope")
def priority(run, peak=None):
    """:func:`priority_rows` on the run's ``priority_waits``."""
    return priority_rows(run.priority_waits())


def priority_rows(waits) -> list[dict]:
    """Prioritised ops that waited behind lower-priority responses (``waits_behind_lower``)."""
    if not len(waits):
        return []
    causes = ("running", "not_ready", "ordered_ahead")
    total = int(waits["behind_ns"].sum())
    w = waits.iloc[0]
    step = f" step {int(w['step'])}" if w["step"] >= 0 else ""
    why = {"running": "it was submitted while that response ran (a running collective is not pre-empted)",
           "not_ready": f"rank {int(w['last_rank'])} submitted it last, and priority orders only tensors "
                        "ready on every rank",
           "ordered_ahead": "it was ready on every rank before that work was decided: the runtime "
                            "put lower-priority work first"}[w["cause"]]
    by_cause = ", ".join(f"{c.replace('_', ' ')} {units.duration(waits[f'{c}_ns'].sum())}" for c in causes
                         if waits[f"{c}_ns"].sum() > 0)
    msg = (f"{len(waits)} prioritised op(s) waited behind lower-priority responses for {units.duration(total)} in "
           f"total ({by_cause}); the longest: {w['tensor']} (priority {int(w['priority'])}, rank {int(w['rank'])}"
           f"{step}) waited {units.duration(w['behind_ns'])} behind {int(w['responses'])} response(s) of priority "
           f"<= {int(w['lower_priority'])} because {why}")
    # an inversion the runtime chose ranks with the medium findings; one it could not avoid explains an order
    chosen = bool((waits["ordered_ahead_ns"] > 0).any())
    return [finding("priority", "medium" if chosen else "info",
                    25 + min(15, waits["ordered_ahead_ns"].sum() / 1e6) if chosen else 10,
                    f"prioritised ops waited {units.duration(total)} behind lower-priority work", msg,
                    ranks=[w["rank"]], steps=[w["step"]],
                    window=(int(w["submit_ns"]), int(w["start_ns"])), metric="behind_ns", value=total, unit="ns")]


@rule("runtime", "wire")
def alpha_beta(run, peak=None):
    """Allreduces under the α-β fit's n½ are latency-bound: fuse them (when the fit means something)."""
    out = []
    for _, r in credible(run.alpha_beta()).iterrows():
        if r["op"] == "ALLREDUCE":
            out.append(finding(
                "alpha_beta", "info", 10, f"allreduces under {units.size(r['half_bw_bytes'])} are latency-bound",
                f"{r['backend']} allreduce: latency α ≈ {units.fmt(r['alpha_us'], 'us')}, bandwidth β ≈ "
                f"{units.rate(r['beta_gbps'])}; messages under {units.size(r['half_bw_bytes'])} are latency-bound, "
                "so fuse them into larger ones", metric="half_bw_bytes", value=r["half_bw_bytes"], unit="bytes"))
    return out


@rule("wire")
def bandwidth(run, peak=None):
    """Large messages far below the given peak bus bandwidth."""
    by_size = run.bandwidth(peak)
    if not peak or not len(by_size):
        return []
    big = by_size.iloc[-1]
    if not big["efficiency"] == big["efficiency"] or big["efficiency"] >= 0.6:
        return []
    return [finding("bandwidth", "medium", 30,
                    f"{units.size(big['size_bytes'])}+ messages reached {100 * big['efficiency']:.0f} % of the peak",
                    f"{units.size(big['size_bytes'])}+ messages reached {units.rate(big['busbw_gbps'])} bus bandwidth, "
                    f"{100 * big['efficiency']:.0f} % of the {peak:g} GB/s peak: check the interconnect and the "
                    "backend choice", metric="busbw_gbps", value=big["busbw_gbps"], unit="gbps")]


@rule("runtime", "hosts", unless=("ddp",))
def slow_link(run, peak=None):
    """:func:`slow_link_rows` on the run's links, its α-β fit and its fusion."""
    ab = credible(run.alpha_beta()) if run.why_not("alpha_beta") is None else None
    fus = optional(run, "fusion")
    return slow_link_rows(run.link_ops(), run.cross_link(), fus, ab, _prefix(run),
                          bool(run.meta.get("hierarchical_allreduce")))


def slow_link_rows(ops, cost, fus=None, ab=None, prefix="RINGSCOPE_", hierarchical=False) -> list[dict]:
    """The cross-host link left the ranks waiting 20 % of the step or more, and the remedy."""
    if not len(ops) or not len(cost):
        return []
    share = float(cost["share_pct"].median())
    if share < 20:
        return []
    cross = ops[ops["link"] == "cross"]
    bus = (cross["busbw_gbps"] * cross["time_ns"]).sum() / cross["time_ns"].sum()
    big = cross[cross["op_bytes"] >= cross["op_bytes"].max() / 2]
    fits = ab[ab["op"] == "ALLREDUCE"] if ab is not None else ()
    small_cut = float(fits["half_bw_bytes"].max()) if len(fits) else float(1 << 20)
    small = cross[cross["op_bytes"] < small_cut]
    small_time = float(small["time_ns"].sum() / cross["time_ns"].sum())
    per_step = float(cost["exposed_cross_ns"].median())
    msg = (f"the cross-host link bounds the step: collectives crossing hosts ran at {8 * bus:.2f} Gbit/s busbw "
           f"({units.rate(bus)}; {8 * float(big['busbw_gbps'].median()):.2f} Gbit/s on the largest, "
           f"{units.size(big['op_bytes'].median())} ops) and left the ranks waiting {units.duration(per_step)} per "
           f"step, {share:.0f} % of the step")
    msg += "; " + _slow_link_remedy(cross, small, small_time, small_cut, fus, prefix, hierarchical)
    return [finding("slow_link", "high" if share >= 40 else "medium", 55 + share / 2,
                    f"the cross-host link bounds the step: ranks waited on it {share:.0f} % of the step", msg,
                    ranks=cost["rank"], metric="share_pct", value=share, unit="pct")]


def _slow_link_remedy(cross, small, small_time, small_cut, fus, prefix, hierarchical) -> str:
    steps = cross.loc[cross["step"] >= 0, "step"].nunique()
    per_step = small["response"].nunique() / steps if steps else 0.0
    if small_time >= 0.5 and per_step >= 4:   # several latency-bound collectives a step: one would do
        what = (f"{small_time * 100:.0f} % of that link time went to {per_step:.0f} ops per step under "
                f"{units.size(small_cut)} (median {units.size(small['op_bytes'].median())}), each paying the "
                "link's latency")
        s = fus.iloc[0] if fus is not None and len(fus) else None
        if s is not None and s["full_pct"] == s["full_pct"] and s["full_pct"] >= 25:
            return (what + f": raise {prefix}FUSION_THRESHOLD (now {units.size(s['threshold'])}, filled by "
                    f"{s['full_pct']:.0f} % of ops) so fewer, larger collectives cross it")
        thr = "" if s is None or s["threshold"] != s["threshold"] else \
            f" (ops fill {100 * s['median_fill']:.1f} % of the {units.size(s['threshold'])} threshold at the median)"
        return what + f": fuse more per cycle{thr}: raise {prefix}CYCLE_TIME so fewer, larger collectives cross it"
    flat = cross[cross["algorithm"] == "ring"]
    if not hierarchical and len(flat):
        n, c = int(flat["ranks"].max()), int(flat["hosts"].max())
        if n > c:
            # bytes over one host's link per byte of buffer: the ring's crossing hops shared by the hosts,
            # against 2(c-1)/c when every local rank's shard crosses (docs/MULTIHOST.md)
            now = float((flat["traffic_bytes"] / (c * flat["op_bytes"])).median())
            then = 2 * (c - 1) / c
            how = f"{prefix}HIERARCHICAL_ALLREDUCE=1" + (", or ringscope run --hierarchical-allreduce"
                                                           if prefix == "RINGSCOPE_" else "")
            return (f"most of it went to large ops on a flat ring of {n} ranks over {c} hosts: run hierarchical "
                    f"allreduce ({how}), which sends {then:.2g}x each buffer's size over a host's link instead of "
                    f"{now:.2g}x ({now / then:.2g}x less)")
    return ("fusing or regrouping cannot cut it much: the link itself is the limit, so a faster link between "
            "hosts or fewer bytes (fp16 gradients) would")
