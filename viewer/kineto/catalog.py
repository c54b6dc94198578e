"""The analyses of a torch.profiler (Kineto) run, declared once (``viewer.registry``), nested under
``kineto`` in the summary (docs/KINETO.md has their definitions)."""
from __future__ import annotations

from viewer.analyses import stragglers
from viewer.kineto import collectives, per_rank
from viewer.registry import Column as C
from viewer.registry import Table, analysis

RANK = C("rank", "rank", "count")


def _per_rank(run, name: str):
    """One of the answers computed rank by rank (:mod:`viewer.kineto.per_rank`), all in one pass a run."""
    return run.shared("kineto.per_rank", lambda: per_rank.answers(run.tables))[name]


@analysis(needs=("kineto",), json="rows", key="kineto.temporal_breakdown", table=Table(
    "GPU time per rank (HTA's temporal breakdown)", (
        RANK, C("kernel_time_ns", "kernel time", "ns"), C("compute_pct", "compute", "pct"),
        C("non_compute_pct", "non-compute", "pct"), C("idle_pct", "idle", "pct"),
        C("communication_ns", "communication", "ns"))))
def kineto_temporal(run):
    """Per rank: GPU time in compute, non-compute and idle (HTA's temporal breakdown)."""
    return _per_rank(run, "temporal")


@analysis(needs=("kineto",), json="rows", key="kineto.overlap", table=Table(
    "Communication overlapped by compute, per rank (HTA's definition)", (
        RANK, C("communication_ns", "communication", "ns"), C("overlap_ns", "overlapped", "ns"),
        C("exposed_ns", "exposed", "ns"), C("overlap_pct", "overlap", "pct"))))
def kineto_overlap(run):
    """Per rank: the share of NCCL kernel time during which a compute kernel also ran."""
    return _per_rank(run, "overlap")


@analysis(needs=("kineto",))
def kineto_collectives(run):
    """One row per collective and rank: op, bytes, time, algbw, busbw."""
    return collectives.collectives_table(run.tables)


@analysis(needs=("kineto",), json="rows", key="kineto.collectives", table=Table(
    "Collectives (nccl-tests conventions)", (
        C("op", "op"), C("dtype", "dtype"), C("bytes", "size", "bytes"), C("n", "ranks", "count"),
        C("count", "count", "count"), C("time_us", "time", "us"), C("algbw_gbps", "algbw", "gbps"),
        C("busbw_gbps", "busbw", "gbps"), C("busbw_max_gbps", "busbw max", "gbps"))))
def kineto_collectives_summary(run):
    """Per op, dtype, size and group size: count, median time and bandwidths."""
    return collectives.collectives_summary(run.kineto_collectives())


@analysis(needs=("kineto",), json="rows", key="kineto.steps", table=Table("Per step (ProfilerStep#N)", (
    RANK, C("step", "step", "count"), C("step_ns", "step time", "ns"), C("gpu_busy_ns", "GPU busy", "ns"),
    C("compute_ns", "compute", "ns"), C("communication_ns", "comm", "ns"), C("exposed_comm_ns", "exposed comm", "ns"),
    C("gpu_idle_ns", "GPU idle", "ns"), C("collectives", "collectives", "count"))))
def kineto_steps(run):
    """Per rank and ProfilerStep: GPU busy, compute, communication, exposed communication, idle."""
    return _per_rank(run, "steps")


@analysis(needs=("kineto",), json="rows", key="kineto.streams")
def kineto_streams(run):
    """Per rank and GPU stream: its kernels and how busy it was."""
    return _per_rank(run, "streams")


@analysis(needs=("kineto",))
def kineto_launches(run):
    """One row per collective and rank: when the CPU launched it (the loaded ranks compared)."""
    return stragglers.negotiations(run.tables, size=collectives.ranks_loaded(run.tables))


@analysis(needs=("kineto",), json="top", key="kineto.stragglers")
def kineto_stragglers(run):
    """Per collective seen on every loaded rank: the last launcher, the spread and the wait it imposed."""
    return collectives.collective_stragglers(run.tables, run.kineto_launches())


@analysis(needs=("kineto",), json="rows", key="kineto.rank_stragglers", table=Table(
    "Who launches collectives last (clock-corrected)", (
        RANK, C("negotiations", "collectives", "count"), C("times_last", "last", "count"),
        C("pct_last", "% last", "pct"), C("wait_imposed_ns", "wait imposed", "ns"),
        C("median_lateness_ns", "median lateness", "ns"), C("clock_offset_ns", "clock offset", "ns"),
        C("clock_offset_uncertainty_ns", "±", "ns"))))
def kineto_rank_stragglers(run):
    """Per rank: how often it launched a collective last, the wait it imposed, its clock offset."""
    return collectives.rank_summary(run.tables, run.kineto_launches())


@analysis(needs=("kineto",))
def kineto_kernel_launches(run):
    """One row per kernel, memcpy and memset: its launch call, launch delay and the GPU idle time before it."""
    return _per_rank(run, "kernel_launches")


@analysis(needs=("kineto",), json="rows", key="kineto.launch_stats", table=Table(
    "Kernel launches per rank (HTA's kernel launch statistics)", (
        RANK, C("launched", "GPU work", "count"), C("launch_median_ns", "launch call", "ns"),
        C("work_median_ns", "on the GPU", "ns"), C("delay_median_ns", "launch delay", "ns"),
        C("short_pct", "shorter than launch", "pct"), C("waited_pct", "GPU waited for it", "pct"),
        C("launch_bound_pct", "launch-bound", "pct"), C("idle_ns", "GPU idle", "ns"),
        C("host_wait_ns", "waiting for the host", "ns"), C("step_start_idle_ns", "at step start", "ns"))))
def kineto_launch_stats(run):
    """Per rank: medians of launch call, work and launch delay; short and launch-bound shares; where the GPU idled."""
    return _per_rank(run, "launch_stats")
