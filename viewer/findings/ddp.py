"""Findings in DDP's words (docs/DDP.md): a ``bucket_cap_mb`` too small for the model, and a reduction the
backward pass does not hide; their advice names DDP's settings, never the runtime's."""
from __future__ import annotations

import math

from viewer import units
from viewer.findings.rule import finding, most_exposed, rule, step_window

MANY_BUCKETS = 8              # buckets a step from which each one's fixed latency adds up
LATENCY_BOUND = 4 << 20       # a bucket under this pays mostly a collective's fixed cost, on any link
MIB = 1 << 20


def figure_mb(nbytes: float) -> float:
    """``nbytes`` in MiB, rounded down to 1, 2 or 5 times a power of ten (a figure to type)."""
    mb = nbytes / MIB
    e = 10 ** math.floor(math.log10(mb))
    return max(m * e for m in (1, 2, 5) if m * e <= mb)


def _mb(nbytes: float) -> str:
    """The shortest ``bucket_cap_mb`` that gives ``nbytes`` (DDP takes int(mb * 1 MiB))."""
    v = nbytes / MIB
    return next((t for t in (f"{v:.{d}g}" for d in range(1, 7)) if int(float(t) * MIB) == int(nbytes)), f"{v:.6g}")


def too_small(lay: dict | None) -> bool:
    """Many buckets a step, each small enough that its fixed latency is most of its cost."""
    return lay is not None and lay["buckets"] >= MANY_BUCKETS and lay["median_bytes"] < LATENCY_BOUND


@rule("ddp", "collectives")
def bucket_cap(run, peak=None):
    """Many small buckets a step: ``bucket_cap_mb`` too small for the model, and the figure to try."""
    lay = run.ddp_layout()
    if not too_small(lay):
        return []
    fig = figure_mb(lay["bytes"] / 4)
    share = 100.0 * lay["busy_ns"] / run.step_ns if run.step_ns else float("nan")
    busy = f"{units.duration(lay['busy_ns'])} a step" + (f" ({share:.0f} % of the step)" if share == share else "")
    return [finding(
        "bucket_cap_small", "high" if share >= 50 else "medium", 35 + min(share, 60) / 2 if share == share else 35,
        f"bucket_cap_mb={_mb(lay['cap'])} is too small for the model: {lay['buckets']} buckets a step",
        f"bucket_cap_mb={_mb(lay['cap'])} splits the model's {units.size(lay['bytes'])} of gradients into "
        f"{lay['buckets']} buckets a step (median {units.size(lay['median_bytes'])}); each is an allreduce of its "
        f"own that pays the collective's fixed latency, and the buckets' allreduces were in flight {busy}: try "
        f"DistributedDataParallel(..., bucket_cap_mb={fig:g}), about 4 buckets, few enough to pay little latency "
        "and enough for the first ones to reduce while the backward pass runs",
        metric="buckets_per_step", value=lay["buckets"], unit="count")]


@rule("ddp", "steps")
def reduction_exposed(run, peak=None):
    """The training thread waited for the buckets after its backward pass, on the rank where it waited most."""
    lay, buckets = run.ddp_layout(), run.ddp_buckets()
    worst = most_exposed(run) if lay is not None and len(buckets) else None
    if worst is None:
        return []
    pct, rank, w, step = worst
    first, tail = buckets.iloc[0], buckets.loc[buckets["exposed_ns"].idxmax()]
    msg = (f"on rank {rank} the backward pass waited {units.duration(w['exposed_comm_ns'])} a step for its buckets "
           f"after its own work ended ({pct:.0f} % of the step), the most for bucket {int(tail['bucket'])} "
           f"({units.size(tail['bytes'])}, {units.duration(tail['exposed_ns'])} of its allreduce after the pass); "
           f"the first bucket was ready {units.duration(first['ready_ns'])} into the pass: ")
    late = tail["last_rank"]
    if lay["buckets"] == 1:
        msg += (f"every gradient ({units.size(lay['bytes'])}) is reduced in one bucket, as bucket_cap_mb="
                f"{_mb(lay['cap'])} holds the whole model, so the reduction starts only once the pass has "
                f"produced the last gradient: try bucket_cap_mb={figure_mb(lay['bytes'] / 4):g} (about 4 buckets) "
                "so the first buckets reduce while the pass runs")
    elif too_small(lay):
        msg += f"its {lay['buckets']} buckets a step each pay an allreduce's latency (see the bucket_cap_mb finding)"
    elif late == late and late is not None and int(late) != rank and tail["pct_last"] >= 75:
        msg += (f"rank {int(late)} was the last to have that bucket ready in {tail['pct_last']:.0f} % of steps: "
                f"the others waited for it (see the straggler finding for rank {int(late)})")
    else:
        msg += ("the buckets' allreduces take longer than the pass leaves them: send fewer bytes "
                "(ddp.register_comm_hook(None, fp16_compress_hook), or PowerSGD) or use a faster link")
        if not (run.meta.get("ddp") or {}).get("gradient_as_bucket_view", True):
            msg += "; gradient_as_bucket_view=True also saves copying each gradient into its bucket"
    return [finding("reduction_exposed", "medium", 20 + pct / 5,
                    f"the gradient reduction was exposed for {pct:.0f} % of the step on rank {rank}", msg,
                    ranks=[rank], steps=[step], window=step_window(run, step, [rank]),
                    metric="exposed_comm_pct", value=pct, unit="pct")]
