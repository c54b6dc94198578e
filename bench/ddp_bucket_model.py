"""A candidate model for ``whatif --bucket-cap-mb`` (issue 44), not shipped: a DDP job's step under another
``bucket_cap_mb``, replayed from its trace. bench/ddp_bucket_cap.py --whatif measures it against real reruns;
on the shared 2-core machine it answered too rarely and too far off for ringscope to give its answer
(docs/DDP.md), so ``ringscope whatif`` still refuses a DDP trace.

The parameters are cut into buckets as torch's reducer cuts them after its first step: in the order their
gradients came (the trace's own buckets, which must hold the parameters in reverse registration order),
a bucket closing once its bytes reach its limit: the first bucket's ``first_bucket_bytes_cap`` (the run's
as recorded; for the new cap, the cap itself, as torch sets it when ``bucket_cap_mb`` is given), the
others' the cap. Then, per rank and step of the trace:

- each parameter's gradient is ready when the backward pass's own work reached it: the work between two
  of the trace's bucket calls is spread over the later bucket's parameters by bytes, the communication
  hook's own time on the training thread taken out;
- each new bucket is ready at its last parameter's readiness plus the hooks called before it, each a
  hook's median time on the thread;
- the buckets' allreduces run one after the other once every rank has queued them, each costing
  ``fixed + per_byte * bytes``, fitted on the trace's buckets (their own part: from the later of every
  rank's queuing and the previous bucket's end to their end), which needs buckets of two sizes at least;
- the pass ends at the later of its own work and the last allreduce, plus what followed it in the trace.

The step predicted is the measured step plus the change in the pass's length between this model at the
run's own cap and at the new one (the model's error at the run's own cap cancels).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from viewer.analyses import ddp

MIB = 1 << 20
MIN_SIZE_SPAN = 2.0   # the largest bucket over the smallest: less, and fixed and per-byte costs are one figure
AGREE_PCT = 15.0      # the even steps' and the odd steps' fits must predict steps this close (issue 44's target)


class BucketModelError(ValueError):
    """The trace cannot be replayed under another bucket cap (one line)."""


@dataclass
class BucketModel:
    names: list[str]              # the parameters in gradient order
    nbytes: np.ndarray            # their bytes, in that order
    cap: int                      # the run's bucket cap
    first_cap: int                # its first bucket's
    fixed_ns: float               # an allreduce's cost: fixed_ns + ns_per_byte * bytes
    ns_per_byte: float
    fit_n: int
    fit_sizes: tuple[int, int]    # the smallest and largest bucket fitted (bytes)
    halves: list                  # (fixed, per byte) fitted on the even steps, and on the odd ones
    hook_ns: float                # the hook's median time on the training thread, per bucket
    steps: list[dict]             # per step: {"step", "ranks": {rank: {...}}}
    measured_ns: dict             # (rank, step) -> the step's measured length

    def cost_ns(self, nbytes: float) -> float:
        return self.fixed_ns + self.ns_per_byte * nbytes


def cut(nbytes, first_cap: int, cap: int) -> list[int]:
    """The buckets' sizes in parameters, for ``nbytes`` in gradient order (torch's reducer: a bucket closes
    once its bytes reach its limit; the first limit ``first_cap``, then ``cap``)."""
    counts, size, n, limit = [], 0, 0, first_cap
    for b in nbytes:
        size, n = size + int(b), n + 1
        if size >= limit:
            counts.append(n)
            size, n, limit = 0, 0, cap
    if n:
        counts.append(n)
    return counts


def fit(run) -> BucketModel:
    """The model of a DDP run's trace (:class:`BucketModelError`: it has none)."""
    meta = run.meta.get("ddp") or {}
    params = meta.get("params")
    if not params:
        raise BucketModelError("the trace does not list DDP's parameters (run meta ddp.params): re-record it")
    steps = ddp.bucket_steps(run.tables)
    if not len(steps):
        raise BucketModelError("no DDP bucket in a complete step to replay")
    names = [n for n, _ in reversed(params)]
    nbytes = np.array([b for _, b in reversed(params)], dtype="int64")
    one = steps[(steps["rank"] == steps["rank"].min()) & (steps["step"] == steps["step"].min())].sort_values("bucket")
    counts, sizes = one["params"].astype(int).tolist(), one["bytes"].astype(int).tolist()
    bounds = np.cumsum([0, *counts])
    if bounds[-1] != len(nbytes) or any(int(nbytes[a:b].sum()) != s for a, b, s in zip(bounds, bounds[1:], sizes)):
        raise BucketModelError("the buckets do not hold the parameters in reverse registration order (a model "
                               "whose gradients come in another order): the replay cannot re-cut them")
    cost = _own_costs(steps)
    lo, hi = int(cost["bytes"].min()), int(cost["bytes"].max())
    if hi < MIN_SIZE_SPAN * lo:
        raise BucketModelError(
            f"every bucket is about {hi / MIB:.3g} MiB: one size cannot separate an allreduce's fixed cost "
            "from its cost per byte, so no other bucket size can be predicted")
    fixed, per_byte = _cost_fit(cost)
    halves = [_cost_fit(cost[cost["step"] % 2 == k]) for k in (0, 1)]
    hook = float((steps["end_ns"] - steps["comm_ns"] - steps["start_ns"]).clip(lower=0).median())
    cap, first_cap = int(meta.get("bucket_cap_bytes", 0)), int(meta.get("first_bucket_cap_bytes", 0))
    return BucketModel(names, nbytes, cap, first_cap, fixed, per_byte, len(cost), (lo, hi), halves, hook,
                       _per_step(run, steps, nbytes, bounds, hook), _measured(run))


def _cost_fit(cost: pd.DataFrame) -> tuple[float, float]:
    """(fixed, per byte) ns of an allreduce, least squares over the buckets' own costs (their mean: the
    queue adds them up)."""
    if cost["bytes"].nunique() < 2:
        raise BucketModelError("too few steps to fit the allreduce's cost on")
    per_byte, fixed = np.polyfit(cost["bytes"].astype(float), cost["own_ns"].astype(float), 1)
    if per_byte <= 0 or fixed < 0:
        raise BucketModelError(f"the buckets' allreduces give no credible cost per byte (fitted {fixed / 1e3:.0f} "
                               f"µs + {per_byte * MIB / 1e3:.0f} µs/MiB over {len(cost)} allreduces): too noisy")
    return float(fixed), float(per_byte)


def _own_costs(steps: pd.DataFrame) -> pd.DataFrame:
    """Per step and bucket, the allreduce's own part: from the later of every rank's queuing and the
    previous bucket's end (on every rank) to its end (on the last rank)."""
    g = steps.assign(queued=steps["end_ns"] - steps["comm_ns"]).groupby(["step", "bucket"]).agg(
        queued=("queued", "max"), end=("end_ns", "max"), bytes=("bytes", "first")).reset_index()
    prev = g.groupby("step")["end"].shift().fillna(g["queued"])
    return g.assign(own_ns=g["end"] - np.maximum(g["queued"], prev))


def _per_step(run, steps: pd.DataFrame, nbytes: np.ndarray, bounds: np.ndarray, hook: float) -> list[dict]:
    """Per step and rank: when the pass began, its own work's progress at each parameter's gradient, its
    own work's end, and what followed the last allreduce to the pass's end."""
    ev = run.tables.events
    bw = ev[(ev["name"] == "BACKWARD") & (ev["ph"] == "X")].groupby(["rank", "step"]).agg(
        t0=("t_ns", "min"), dur=("dur_ns", "max"))
    sy = ev[(ev["name"] == "SYNCHRONIZE") & (ev["ph"] == "X")].groupby(["rank", "step"])["t_ns"].min()
    frac = np.concatenate([np.cumsum(nbytes[a:b]) / max(int(nbytes[a:b].sum()), 1) for a, b in zip(bounds, bounds[1:])])
    out = []
    for step, d in steps.groupby("step"):
        ranks = {}
        for rank, r in d.sort_values("bucket").groupby("rank"):
            if (rank, step) not in bw.index:
                continue
            t0, dur = bw.loc[(rank, step)]
            sync = sy.get((rank, step), np.nan)
            thread = (r["end_ns"] - r["comm_ns"] - r["start_ns"]).clip(lower=0).to_numpy()
            done = r["start_ns"].to_numpy() - t0 - np.concatenate([[0], np.cumsum(thread)[:-1]])   # own work
            done = np.maximum.accumulate(np.maximum(done, 0))
            before = np.concatenate([[0], done[:-1]])
            span = np.repeat(done - before, np.diff(bounds))
            progress = np.repeat(before, np.diff(bounds)) + frac * span
            end = (sync if sync == sync else r["start_ns"].max()) - t0 - thread.sum()
            last = r["end_ns"].max() - t0
            ranks[int(rank)] = {"t0": float(t0), "progress": progress, "work_end": max(float(end), float(done[-1])),
                                "after": float(dur - max(last, (sync - t0) if sync == sync else last)),
                                "measured_pass": float(dur)}
        if ranks:
            out.append({"step": int(step), "ranks": ranks})
    return out


def _measured(run) -> dict:
    st = run.get("step_times")
    return {(int(r), int(s)): float(d) for r, s, d in zip(st["rank"], st["step"], st["dur_ns"])}


def replay_pass(model: BucketModel, step: dict, counts: list[int]) -> dict[int, float]:
    """Per rank, the backward pass's length (ns) with the buckets ``counts`` (parameters each, in order)."""
    ranks = step["ranks"]
    ends = np.cumsum(counts) - 1
    sizes = [int(s.sum()) for s in np.split(model.nbytes, np.cumsum(counts)[:-1])]
    queued = {r: [v["t0"] + v["progress"][e] + (i + 1) * model.hook_ns for i, e in enumerate(ends)]
              for r, v in ranks.items()}
    t = 0.0
    for k, size in enumerate(sizes):   # one queue: each waits for every rank and for the one before
        t = max(t, max(q[k] for q in queued.values())) + model.cost_ns(size)
    return {r: max(v["work_end"] + len(counts) * model.hook_ns, t - v["t0"]) + max(v["after"], 0.0)
            for r, v in ranks.items()}


def predict(model: BucketModel, cap_bytes: int) -> dict:
    """The step (ms) measured, replayed at the run's cap (the baseline) and at ``cap_bytes``; the buckets.
    :class:`BucketModelError` when the cost fitted on the even steps and the one on the odd steps predict
    steps further apart than ``AGREE_PCT``: the trace's own noise is larger than the answer's tolerance."""
    own, new = cut(model.nbytes, model.first_cap, model.cap), cut(model.nbytes, cap_bytes, cap_bytes)
    res = _predict(model, own, new)
    halves = [_predict(replace(model, fixed_ns=f, ns_per_byte=b), own, new)["predicted_step_ms"]
              for f, b in model.halves]
    spread = 100 * abs(halves[0] - halves[1]) / res["predicted_step_ms"]
    if spread > AGREE_PCT:
        raise BucketModelError(
            f"the allreduce's cost varies too much between the trace's steps to predict bucket_cap_mb="
            f"{cap_bytes / MIB:g}: fitted on its even steps it gives {halves[0]:.1f} ms a step, on its odd "
            f"steps {halves[1]:.1f} ms ({spread:.0f} % apart; a longer or quieter run may settle it)")
    res["halves_step_ms"] = halves
    sizes_new = [int(x.sum()) for x in np.split(model.nbytes, np.cumsum(new)[:-1])]
    lo, hi = model.fit_sizes
    return {**res, "run_buckets": len(own), "run_cap_bytes": model.cap, "cap_bytes": cap_bytes,
            "buckets": len(new), "bucket_bytes": sizes_new,
            "fit": {"fixed_us": model.fixed_ns / 1e3, "us_per_mib": model.ns_per_byte * MIB / 1e3,
                    "n": model.fit_n, "min_bytes": lo, "max_bytes": hi},
            "hook_us": model.hook_ns / 1e3,
            "extrapolated": bool(min(sizes_new) < lo / MIN_SIZE_SPAN or max(sizes_new) > hi * MIN_SIZE_SPAN)}


def _predict(model: BucketModel, own: list[int], new: list[int]) -> dict:
    rows = []
    for s in model.steps:
        base, pred = replay_pass(model, s, own), replay_pass(model, s, new)
        for r in s["ranks"]:
            m = model.measured_ns.get((r, s["step"]))
            if m is not None:
                rows.append((s["step"], r, m, m + base[r] - s["ranks"][r]["measured_pass"], m + pred[r] - base[r]))
    if not rows:
        raise BucketModelError("no step with both its length and its backward pass to replay")
    df = pd.DataFrame(rows, columns=["step", "rank", "measured", "baseline", "predicted"]).groupby("step").mean()
    per = [{"step": int(s), "measured_ms": m / 1e6, "baseline_ms": b / 1e6, "predicted_ms": p / 1e6}
           for s, m, b, p in zip(df.index, df["measured"], df["baseline"], df["predicted"])]
    return {"measured_step_ms": statistics.median(r["measured_ms"] for r in per),
            "baseline_step_ms": statistics.median(r["baseline_ms"] for r in per),
            "predicted_step_ms": statistics.median(r["predicted_ms"] for r in per), "steps": per}
