"""Findings about a torch.profiler (Kineto) run, with a PyTorch user's advice."""
from __future__ import annotations

import re

from viewer import units
from viewer.analyses import stragglers as st
from viewer.findings.ranks import _cost
from viewer.findings.rule import at_worst_step, finding, rule, step_window

IDLE_PCT = 25.0            # GPU idle from this share of its time is a finding; high from twice it
LAUNCH_BOUND_PCT = 25.0    # launch-bound work from this share of the launched work; high from twice it
LAUNCH_MIN_WORK = 100      # fewer pieces of GPU work say nothing about a launch rate
OVERLAP_PCT = 50.0         # NCCL time overlapped by compute below this share is low ...
EXPOSED_PCT = 10.0         # ... when the rest is at least this share of the step; high from 40 %


def _kernel(name: str) -> str:
    """A kernel's name without its return type, namespaces' noise, template and call arguments."""
    n = str(name).replace("(anonymous namespace)::", "")
    n = n[5:] if n.startswith("void ") else n
    return re.split(r"[<(]", n)[0].strip()[:60] or str(name)[:60]


@rule("kineto")
def gpu_idle(run, peak=None):
    """The GPU idle for IDLE_PCT of its time or more: where, why, the longest gap and the fix."""
    tb = run.kineto_temporal()
    tb = tb[tb["idle_pct"].notna()]
    if not len(tb) or float(tb["idle_pct"].max()) < IDLE_PCT:
        return []
    w = tb.loc[tb["idle_pct"].idxmax()]
    rank, pct, idle = int(w["rank"]), float(w["idle_pct"]), float(w["idle_ns"])
    ls = run.kineto_launch_stats().set_index("rank").loc[rank]
    kl = run.kineto_kernel_launches()
    kl = kl[kl["rank"] == rank]
    gap = kl.loc[kl["gap_ns"].idxmax()]
    host, start, inside, outside = (100.0 * float(ls[c]) / idle if idle else 0.0 for c in
                                    ("host_wait_ns", "step_start_idle_ns", "in_step_idle_ns", "outside_steps_idle_ns"))
    others = tb[tb["rank"] != rank]
    also = ("" if not len(others) else f"; rank {int(others['rank'].iloc[0])}: {units.pct(others['idle_pct'].iloc[0])}"
            if len(others) == 1 else f"; the other ranks: {units.pct(others['idle_pct'].min())} to "
            f"{units.pct(others['idle_pct'].max())}")
    step = int(gap["step"])
    where = f" in step {step}" if step >= 0 else ""
    msg = (f"rank {rank}'s GPU sat idle {units.pct(pct)} of its {units.duration(w['kernel_time_ns'])} "
           f"({units.duration(idle)}{also}; HTA's temporal breakdown); " + _where(inside, start, outside)
           + f"; for {units.pct(host)} of it the next kernel had not been launched yet (the GPU waited for the "
           f"host); the longest gap: {units.duration(gap['gap_ns'])} before {_kernel(gap['name'])}{where}: "
           + _idle_fix(host, start, inside))
    return [finding("gpu_idle", "high" if pct >= 2 * IDLE_PCT else "medium", 30 + pct / 4,
                    f"the GPU sat idle {units.pct(pct)} of the time on rank {rank}", msg, ranks=[rank],
                    steps=[step],
                    window=(int(gap["t_ns"]) - int(gap["gap_ns"]), int(gap["t_ns"])),
                    metric="idle_pct", value=pct, unit="pct")]


def _where(inside: float, start: float, outside: float) -> str:
    parts = [f"{units.pct(p)} {what}" for p, what in ((inside, "between kernels inside steps"),
                                                      (start, "at a step's start, before its first kernel"),
                                                      (outside, "outside steps")) if p > 0]
    return "of that idle time, " + ", ".join(parts or ["none lay inside steps"])


def _idle_fix(host: float, start: float, inside: float) -> str:
    """The fix for each cause holding a third of the idle time: the host, or work queued behind other work."""
    fixes = []
    if host >= 100 / 3:
        fixes.append(
            "each step waits for its input before the first kernel: raise the DataLoader's num_workers, set "
            "pin_memory=True and copy batches with .to(device, non_blocking=True), and keep the next batch "
            "prefetched (prefetch_factor)" if start >= inside else
            "the CPU does not launch work fast enough between kernels: look at what the host does in those gaps, "
            "drop host syncs inside the step (.item(), .cpu(), .tolist(), printing or logging tensors, "
            "torch.cuda.synchronize()), and launch more per call: torch.compile to fuse small ops, CUDA graphs "
            "(torch.compile(mode=\"reduce-overhead\")), or a larger batch per step")
    if host <= 200 / 3:
        fixes.append("where the GPU had its next work queued, it waited on something else: streams waiting on "
                     "each other's events, or collectives waiting for the other ranks: overlap communication with "
                     "compute and even out the ranks' work")
    return "; ".join(fixes)


@rule("kineto")
def launch_overhead(run, peak=None):
    """Launch-bound work (shorter than its launch, waited for by an idle GPU) from LAUNCH_BOUND_PCT."""
    ls = run.kineto_launch_stats()
    ls = ls[(ls["launched"] >= LAUNCH_MIN_WORK) & ls["launch_bound_pct"].notna()]
    if not len(ls) or float(ls["launch_bound_pct"].max()) < LAUNCH_BOUND_PCT:
        return []
    w = ls.loc[ls["launch_bound_pct"].idxmax()]
    rank, pct = int(w["rank"]), float(w["launch_bound_pct"])
    kl = run.kineto_kernel_launches()
    bound = kl[(kl["rank"] == rank) & kl["waited"] & kl["short"] & (kl["step"] >= 0)]
    step = int(bound["step"].value_counts().idxmax()) if len(bound) else None
    msg = (f"on rank {rank}, {units.pct(pct)} of {units.count(w['launched'])} kernels, copies and memsets ran for "
           f"less time than the CPU call that launched them while the idle GPU waited for that call (median launch "
           f"call {units.duration(w['launch_median_ns'])}, median time on the GPU "
           f"{units.duration(w['work_median_ns'])}, median launch delay {units.duration(w['delay_median_ns'])}): "
           "the CPU's launches set the pace, not the GPU; launch fewer, larger kernels: capture the step in a CUDA "
           "graph (torch.compile(mode=\"reduce-overhead\") or torch.cuda.graph), fuse small elementwise ops with "
           "torch.compile, use the fused or foreach optimizers (fused=True), or raise the batch size so each kernel "
           "does more work")
    return [finding("launch_overhead", "high" if pct >= 2 * LAUNCH_BOUND_PCT else "medium", 28 + pct / 4,
                    f"kernel launches bound the GPU: {units.pct(pct)} of the work on rank {rank} waited on its launch",
                    msg, ranks=[rank], steps=[step],
                    window=step_window(run, step, [rank]), metric="launch_bound_pct", value=pct, unit="pct")]


@rule("kineto", "steps")
def low_overlap(run, peak=None):
    """Exposed NCCL time from EXPOSED_PCT of the step, with under OVERLAP_PCT of it overlapped."""
    ks = run.kineto_steps()
    ks = ks[(ks["step"] >= 0) & ks["exposed_comm_ns"].notna() & (ks["step_ns"] > 0)]
    ov = run.kineto_overlap().set_index("rank")["overlap_pct"]
    if not len(ks) or not len(ov):
        return []
    per_rank = ks.groupby("rank")[["exposed_comm_ns", "step_ns"]].sum().astype("float64")
    share = 100.0 * per_rank["exposed_comm_ns"] / per_rank["step_ns"]
    rank, pct = int(share.idxmax()), float(share.max())
    overlap = float(ov.get(rank, float("nan")))
    if pct < EXPOSED_PCT or not overlap < OVERLAP_PCT:
        return []
    mine = ks[ks["rank"] == rank]
    n = len(mine)
    exposed, step_ns = per_rank.loc[rank, "exposed_comm_ns"] / n, per_rank.loc[rank, "step_ns"] / n
    step = int(mine.loc[mine["exposed_comm_ns"].astype("float64").idxmax(), "step"])
    msg = (f"on rank {rank}, only {units.pct(overlap)} of the NCCL kernel time ran beside a compute kernel (HTA's "
           f"overlap), so communication was exposed for {units.pct(pct)} of each step "
           f"({units.duration(exposed)} of {units.duration(step_ns)} on average, the most in step {step}): let the "
           "gradients' allreduce run while backward still computes: "
           "in DDP a smaller bucket_cap_mb (25 MB by default) sends the first buckets sooner, "
           "gradient_as_bucket_view=True saves the copy into the buckets, and model.no_sync() skips the allreduce on "
           "gradient-accumulation steps; under FSDP set backward_prefetch=BackwardPrefetch.BACKWARD_PRE and "
           "forward_prefetch=True; if the collectives themselves are slow, NCCL_DEBUG=INFO shows which transport "
           "NCCL chose (NVLink, InfiniBand or a fallback to sockets)")
    return [finding("low_overlap", "high" if pct >= 40 else "medium", 20 + pct / 2,
                    f"communication was exposed for {units.pct(pct)} of the step on rank {rank}", msg, ranks=[rank],
                    steps=[step], window=step_window(run, step, [rank]), metric="exposed_comm_pct", value=pct,
                    unit="pct")]


@rule("kineto")
def stragglers(run, peak=None):
    """:func:`straggler_rows` with their worst steps; left to the runtime's rule when it negotiated."""
    loaded = int(run.ranks["rank"].nunique())
    if loaded < 2 or "negotiation" in run.has:
        return []
    late = st.late_ranks(run.kineto_rank_stragglers(), loaded, run.step_ns)
    unc = run.ranks["clock_offset_uncertainty_ns"]
    rows = straggler_rows(late, loaded, None if unc.isna().any() else float(unc.max()))
    return at_worst_step(run, rows, run.kineto_launches())


def straggler_rows(late, loaded: int, uncertainty_ns: float | None) -> list[dict]:
    """Ranks that launched collectives last; medium at most when clocks could explain the lead."""
    out = []
    for _, r in late.iterrows():
        rank, share = int(r["rank"]), float(r["share_pct"])
        cost = _cost(r["per_step_ns"], share, r["steps"])
        lead = float(r["median_lateness_ns"])
        msg = (f"rank {rank} launched its collectives last in {units.pct(r['pct_last'])} of the "
               f"{units.count(r['negotiations'])} collectives seen on {'both' if loaded == 2 else f'all {loaded}'} "
               f"loaded ranks (chance: {units.pct(100 / loaded)}), a median {units.duration(lead)} after the ranks' "
               f"middle launch, and cost the others {cost}")
        if uncertainty_ns is None:
            doubt = True
            msg += ("; the ranks' clock offsets are unknown (no shared collective to align them), so the order may be "
                    "the clocks' rather than the ranks'")
        else:
            doubt = lead <= 2 * uncertainty_ns
            if doubt:
                msg += ("; that lead is within twice the clock offsets' uncertainty "
                        f"(±{units.duration(uncertainty_ns)}), so part of it may be the ranks' clocks disagreeing "
                        f"rather than rank {rank} being late")
        msg += (f": look at what rank {rank} does before its collectives that the others do not: its input pipeline "
                "(DataLoader num_workers, pin_memory), larger batches or longer sequences, logging, checkpointing or "
                "evaluation on that rank only, or a slower GPU or host")
        out.append(finding("straggler", "medium" if doubt or (share < 10 and r["steps"]) else "high", 50 + share,
                           f"rank {rank} launches its collectives last: it cost the others {cost}", msg, ranks=[rank],
                           metric="wait_imposed_per_step_ns", value=r["per_step_ns"], unit="ns"))
    return out
