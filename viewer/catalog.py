"""Every analysis of a run, declared once (``viewer.registry``), in the summary's order (Kineto's: kineto/catalog)."""
from __future__ import annotations

import pandas as pd

from viewer import findings as F
from viewer import headline as H
from viewer import vocab
from viewer.analyses import breakdown as B
from viewer.analyses import communication as comm
from viewer.analyses import cores, ddp
from viewer.analyses import critical_path as cp
from viewer.analyses import fusion as fus
from viewer.analyses import hangs as hg
from viewer.analyses import links as lk
from viewer.analyses import priorities as prio
from viewer.analyses import recoveries as rec
from viewer.analyses import rootcause as rc
from viewer.analyses import stragglers as st
from viewer.registry import Column as C
from viewer.registry import Table, analysis, declare
from viewer.summary import records

RANK = C("rank", "rank", "count")
HOST = C("host", "host", varies=True)


def with_hosts(df, ranks):
    """``df`` (a row per rank) with each rank's ``host`` after its ``rank`` column (None when unknown)."""
    host = lk.hosts_of(ranks)
    out = df.copy()
    out.insert(1 if "rank" in out else 0, "host", [host.get(int(r)) for r in out["rank"]] if len(out) else [])
    return out


# the run in a few figures and one sentence: step time, steps, ranks, exposed communication, late rank
declare("headline", lambda run, peak_busbw_gbps=None: H.headline(run, peak_busbw_gbps), json="object")
# what stands out, most important first: one row per finding with its evidence and one fix
declare("findings", lambda run, peak_busbw_gbps=None: F.evaluate(run, peak_busbw_gbps),
        json=lambda df, top: records(df[F.JSON_COLUMNS], top))
# per rank and step: when the step ran (STEP spans, torch.profiler's ProfilerStep#N, else the step's ops)
declare("step_times", lambda run: H.step_times(run.tables))
# per tensor and step: each rank's readiness, the last rank and the wait it imposed on the others
declare("negotiations", lambda run: st.negotiations(run.tables, size=run.size), needs=("negotiation",), json="top",
        rows=lambda neg: st.per_tensor(neg).sort_values("wait_imposed_ns", ascending=False, kind="stable",
                                                        ignore_index=True))
# per rank: how often it was last to submit, the wait it imposed, its median lateness
declare("stragglers", lambda run: with_hosts(st.rank_stragglers(run.negotiations(), size=run.size), run.ranks),
        needs=("negotiation",), json="top", table=Table("Stragglers (who was last to submit)", (
            RANK, HOST, C("negotiations", "negotiations", "count"), C("times_last", "last", "count"),
            C("pct_last", "% last", "pct"), C("wait_imposed_ns", "wait imposed", "ns"),
            C("wait_imposed_per_step_ns", "per step", "ns"), C("median_lateness_ns", "median lateness", "ns"))))
# per tensor: its negotiations, the mean and longest wait from first to last rank ready, the rank usually last
declare("tensor_waits", lambda run: st.tensor_waits(st.per_tensor(run.negotiations())), needs=("negotiation",),
        table=Table("Per-tensor wait (first to last rank ready)", (
            C("tensor", "tensor"), C("negotiations", "negotiations", "count"), C("mean_wait_ns", "mean wait", "ns"),
            C("max_wait_ns", "longest wait", "ns"), C("usual_last_rank", "usually last", "count"))))
# the ranks last far more often than chance, and costing the others more than noise
declare("late_candidates", lambda run: st.late_ranks(run.stragglers(), run.size, run.step_ns), needs=("negotiation",))
# per rank on CPUs shared by more ranks than CPUs: its group of ranks, their CPUs, ranks per CPU (empty: unknown)
declare("core_sharing", lambda run: cores.sharing(run.ranks))


@analysis(needs=("negotiation",))
def late_ranks(run):
    """The ranks flagged late: the candidates but those whose lateness core sharing explains (``root_cause``)."""
    late = run.late_candidates()
    if not len(late) or not len(run.core_sharing()) or run.why_not("root_cause"):
        return late
    causes = run.root_cause()
    shared = causes.loc[causes["cause"] == "core_sharing", "rank"]
    return late[~late["rank"].isin(shared)].reset_index(drop=True)


@analysis(needs=("negotiation", "hosts"), json="rows")
def late_hosts(run):
    """The hosts whose ranks were late together, with their ranks' clock uncertainty."""
    out = st.late_hosts(run.negotiations(), lk.hosts_of(run.ranks), run.step_ns)
    unc = {int(r): int(u) for r, u in zip(run.ranks["rank"], run.ranks["clock_offset_uncertainty_ns"])
           if not pd.isna(u)}
    out["clock_uncertainty_ns"] = [max((unc[r] for r in rs if r in unc), default=None) for rs in out["ranks"]]
    return out


# per fused op: tensors, bytes, fill against the threshold, memcpy share
declare("fusion_ops", lambda run: fus.fused_op_fill(run.fused_ops, threshold=run.meta.get("fusion_threshold")),
        needs=("runtime", "collectives"))
@analysis(needs=("runtime", "collectives"), json="first", table=Table("Fusion (allreduce)", (
    C("ops", "fused ops", "count"), C("tensors", "tensors", "count"), C("mean_tensors_per_op", "tensors per op", "num"),
    C("single_tensor_pct", "single-tensor ops", "pct"), C("median_bytes", "median op size", "bytes"),
    C("threshold", "threshold", "bytes"), C("median_fill", "median fill of threshold", "ratio"),
    C("full_pct", "ops >= 90 % full", "pct"), C("memcpy_share", "memcpy share of op time", "ratio"))))
def fusion(run):
    """Fusion of the allreduces (broadcasts and the like are never fused), the lowest rank's view."""
    ops = run.fusion_ops()
    return fus.fusion_summary(ops[ops["op"] == "ALLREDUCE"])



# a DDP run's usual bucket layout, each bucket per step and rank (docs/DDP.md)
declare("ddp_bucket_steps", lambda run: ddp.bucket_steps(run.tables), needs=("ddp", "collectives"))
declare("ddp_layout", lambda run: ddp.layout(run.ddp_bucket_steps()), needs=("ddp", "collectives"))
# per DDP bucket: bytes, when it was ready in the backward pass, its allreduce, the wait it left, its late rank
declare("ddp_buckets", lambda run: ddp.buckets(run.ddp_bucket_steps(), run.negotiations()),
        needs=("ddp", "collectives", "negotiation"), json="rows", key="ddp.buckets", table=Table(
            "DDP buckets (medians over the steps; ready: after the backward pass began; after the pass: the "
            "allreduce's part the pass waited on)", (
                C("bucket", "bucket", "count"), C("bytes", "bytes", "bytes"), C("cap_bytes", "cap", "bytes"),
                C("params", "params", "count"), C("ready_ns", "ready", "ns"), C("comm_ns", "allreduce", "ns"),
                C("exposed_ns", "after the pass", "ns"), C("last_rank", "usually last ready", "count"),
                C("pct_last", "% last", "pct"), C("wait_imposed_ns", "wait imposed", "ns"))))

# submitted tensors by power-of-two size
declare("tensor_sizes", lambda run: fus.tensor_size_histogram(run.tensor_ops), needs=("runtime",), json="rows")
# per rank: engine cycles, the busy ones, and the share of cycle time spent executing responses
declare("cycles", lambda run: fus.cycle_utilisation(run.cycles, run.fused_ops), needs=("cycles",), json="rows")


@analysis(needs=("wire",))
def op_bandwidth(run, peak_busbw_gbps=None):
    """Per collective and rank across two or more ranks: bytes, time, algbw, busbw, efficiency."""
    bw = comm.op_bandwidth(run.fused_ops, size=run.size, peak_busbw_gbps=peak_busbw_gbps)
    return bw[bw["n"] >= 2].reset_index(drop=True)   # a one-rank op moves nothing over a wire


# bandwidth per power-of-two message size and op (medians, nccl-tests' bus factors)
declare("bandwidth", lambda run, peak_busbw_gbps=None: comm.bandwidth_by_size(run.op_bandwidth(peak_busbw_gbps)),
        needs=("wire",), json="rows", table=Table("Bandwidth by message size (nccl-tests conventions)", (
            C("size_bytes", "size", "bytes"), C("op", "op"), C("ops", "ops", "count"), C("time_us", "time", "us"),
            C("algbw_gbps", "algbw", "gbps"), C("busbw_gbps", "busbw", "gbps"),
            C("busbw_max_gbps", "busbw max", "gbps"), C("efficiency", "efficiency", "ratio")), last=True))


@analysis(needs=("wire",), json="rows", table=Table("Latency and bandwidth fit (time = α + bytes / β)", (
    C("backend", "backend"), C("op", "op"), C("ops", "ops", "count"), C("sizes", "sizes", "count"),
    C("alpha_us", "α", "us"), C("beta_gbps", "β", "gbps"), C("half_bw_bytes", "n½", "bytes"), C("r2", "r²", "num"),
    C("credible", "means something"))))
def alpha_beta(run):
    """time = α + bytes / β per backend and op, on the fastest op of each size; ``credible``: it means something."""
    ab = comm.alpha_beta_fit(run.op_bandwidth())
    return ab.assign(credible=ab.index.isin(comm.credible(ab).index))


# a rank that recorded no phase spans: its framework phases are unknown (?), never guessed
_PHASE_COLUMNS = tuple(C(p.bucket, p.label, "ns", unknown="?" if p in vocab.FRAMEWORK else None)
                       for p in vocab.PHASES)
# per rank and step: the phases adding up to the step; negotiation, queue, memcpy and comm
declare("breakdown_steps", lambda run: B.step_breakdown(run.tables), needs=("runtime", "steps"),
        table=Table("Where each step went, per rank", (RANK, C("step", "step", "count"),
                                                         C("step_ns", "step time", "ns"), *_PHASE_COLUMNS)))
# per rank, the mean per step of every phase and communication stage
declare("breakdown", lambda run: with_hosts(B.breakdown_by_rank(run.breakdown_steps()), run.ranks),
        needs=("runtime", "steps"), json="rows", table=(
            Table("Where the step went, mean per rank (adds up to the step; ? = phases unknown: no phase spans)", (
                RANK, HOST, C("step", "steps", "count"), C("step_ns", "mean step", "ns"), *_PHASE_COLUMNS)),
            Table("Communication per step, mean per rank (wait: blocked in synchronize)", (
                RANK, C("step_ns", "mean step", "ns"), C("framework_wait_ns", "wait", "ns"),
                C("negotiation_ns", "negotiation", "ns"), C("queue_ns", "queue", "ns"), C("memcpy_ns", "copy", "ns"),
                C("comm_ns", "comm", "ns"), C("exposed_ns", "in flight meanwhile", "ns"),
                C("overlapped_ns", "overlapped", "ns")))))


@analysis(needs=("runtime",), json="top")
def hangs(run):
    """Tensors some ranks submitted and others never completed (an elastic run: against its last world)."""
    elastic = run.meta.get("elastic")
    size = elastic["generations"][-1]["size"] if elastic else run.size
    return hg.incomplete_tensors(run.tables, size=size)


# per missing rank: how many tensors it never submitted, from which step
declare("hangs_by_rank", lambda run: hg.hangs_by_rank(run.hangs()), needs=("runtime",), json="rows",
        table=Table("Never completed, by missing rank", (
            RANK, C("tensors", "tensors", "count"), C("first_step", "first step", "count"), C("names", "names"))))
# per late rank, the phase that explains its lateness (or why none does); per other rank, a phase far off
declare("root_cause", lambda run: rc.root_causes(run.breakdown_steps(), run.negotiations(), run.late_candidates(),
                                                 run.tables.events_without_ops, run.stragglers(),
                                                 run.core_sharing()),
        needs=("negotiation", "steps"), json="rows", table=Table(
            "Why the late ranks are late, and phases far off on the others (excess per step over the others' median)", (
                RANK, C("pct_last", "% last", "pct"), C("lateness_ns", "lateness", "ns"), C("cause", "cause"),
                C("explained_by", "explained by"), C("excess_ns", "excess", "ns"), C("share_pct", "share", "pct"),
                C("counters", "counters that differ", rc.counters_text))))
# per step, the chain of phases and collectives across ranks that set the step's length
declare("critical_path", lambda run: cp.critical_path(run.tables, run.breakdown_steps()), needs=("runtime", "steps"),
        json=lambda df, top: records(cp.slowest(df, top)))
# per collective and link kind (intra-host, cross-host): traffic, time and busbw
declare("link_ops", lambda run: lk.link_ops(run.tables), needs=("hosts", "runtime"))
# intra-host and cross-host traffic and busbw per op size
declare("links", lambda run: lk.by_size(run.link_ops()), needs=("hosts", "runtime"), json="rows", table=Table(
    "Links: traffic by op size (a flat ring's hops all run at its slowest link's pace)", (
        C("size_bytes", "size", "bytes"), C("link", "link"), C("phase", "phase"), C("ops", "ops", "count"),
        C("traffic_bytes", "traffic", "bytes"), C("time_us", "time", "us"), C("busbw_gbps", "busbw", "gbps"),
        C("busbw_max_gbps", "busbw max", "gbps"))))
# per rank: the time per step the cross-host link carried its collectives and left it waiting
declare("cross_link", lambda run: lk.cross_link_cost(run.tables, run.link_ops()), needs=("hosts", "runtime"),
        json="rows", table=Table("What the cross-host link cost, mean per step", (
            RANK, HOST, C("step_ns", "step time", "ns"), C("cross_ns", "link busy", "ns"),
            C("exposed_cross_ns", "waited on", "ns"), C("share_pct", "share", "pct"))))


def _reset_note(r) -> str:
    missing = ", ".join(map(str, r.ranks_missing_slice or []))
    return (f"#{r.reset}: {r.cause}; biggest part: {r.biggest or '–'}"
            + (f"; no ELASTIC_RESET slice on rank(s) {missing}" if missing else ""))


# an elastic run's resets of the world: cause, phases and cost (docs/ELASTIC.md)
declare("recoveries", lambda run: rec.recoveries(run.tables), needs=("elastic",), json="rows", table=Table(
    "Recoveries (elastic resets; lost: failure to the end of the first step after; redone: last commit to failure)", (
        C("reset", "#", "count"), C("kind", "kind"), C("sizes", "ranks"), C("detect_ms", "detect", "ms"),
        C("reform_ms", "re-form", "ms"), C("restore_ms", "restore", "ms"), C("first_step_ms", "1st step", "ms"),
        C("lost_ms", "lost", "ms"), C("redone_ms", "redone", "ms"), C("share_pct", "of the job", "pct")),
    derive=lambda d: d.assign(sizes=[f"{a}→{b}" for a, b in zip(d["size_before"], d["size_after"])]),
    note=_reset_note))
# ops with ``priority=`` that waited behind lower-priority responses on their rank, by cause
declare("priority_waits", lambda run: prio.waits_behind_lower(run.tensor_ops, run.fused_ops), needs=("ringscope",))


@analysis(needs=("negotiation",))
def lateness(run):
    """Rank x step matrix of the mean lateness (ns) behind the first rank ready."""
    neg = run.negotiations()
    step = neg["step"].where(neg["step"] >= 0, neg["occurrence"])
    late = (neg["ready_ns"] - neg["first_ns"]).astype("float64")
    return late.groupby([neg["rank"], step]).mean().unstack().sort_index()
