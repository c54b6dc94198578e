"""Replay a run's steps under changed settings (:class:`Settings`) and predict each step's time.

Each step is solved as a fixed point: the ranks' framework chains (compute offsets kept, waits
recomputed) give the tensors' submission times; the coordinator's policy (:mod:`.policy`) plans
them into fused responses; the responses run one after another on the backend at the fitted
alpha-beta cost, after a dispatch latency; their ends are the tensors' completions, which end the
waits. Repeated until the completions stop moving. The dispatch latency is the one free parameter:
it is calibrated so that the run's own settings give the run's mean step time, so the baseline's
error per step shows the spread the model leaves, and only a rerun shows its real accuracy.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from viewer.whatif import costs, policy
from viewer.whatif.rebuild import Step

MAX_ITER = 40
CALIBRATION_STEPS = 40   # at most this many steps, spread over the run, fit the tick and latency
GPU_BACKENDS = ("nccl",)


@dataclass(frozen=True)
class Settings:
    """What-if knobs; None keeps the run's own setting."""
    fusion_threshold: int | None = None   # bytes; 0 = fusion off
    cycle_time_ms: float | None = None
    no_straggler: bool = False            # every rank's compute as the median rank's
    bandwidth_scale: float = 1.0          # 2 = twice the bandwidth
    latency_scale: float = 1.0            # 2 = twice the per-collective latency
    ranks: int | None = None              # ring cost model extrapolation


@dataclass
class Model:
    """What the replay fitted on the run."""
    steps: list
    fits: dict                  # (backend, op) -> costs.Fit
    size: int
    fusion_threshold: int
    cycle_time_ms: float
    latency_ns: dict            # "coordinator" | "rounds" -> dispatch latency (ns)
    tick_ns: float = 0.0        # how often the engine got to plan (fitted): at least the cycle
    assumed: tuple = ()         # settings the trace does not record (defaults assumed)


def cost_of(model: Model, s: Settings, backend: str, op: str, nbytes: int) -> float:
    f = model.fits.get((backend, op)) or next((v for k, v in model.fits.items() if k[1] == op), None)
    if f is None:
        return 0.0
    if s.ranks and s.ranks != model.size:
        f = costs.ring_extrapolate(f, model.size, s.ranks)
    return f.cost_ns(nbytes, s.bandwidth_scale, s.latency_scale)


def _median_rank(step: Step) -> int:
    work = {r: sum(c.gaps) + c.tail_ns for r, c in step.chains.items()}
    ranked = sorted(work, key=lambda r: work[r])
    return ranked[(len(ranked) - 1) // 2]


def _framework(step: Step, done: list, no_straggler: bool, extra_busy_ns: float = 0.0):
    """Per rank: (segment starts, wait spans, step end, start) and each tensor's submission per
    rank. ``extra_busy_ns``: how much longer the engine works than in the run; on a CPU backend it
    shares the cores and the interpreter with the training thread, so the compute stretches by it."""
    m = _median_rank(step) if no_straggler else None
    t0 = step.t0[m] if m is not None else None
    chains: dict = {}
    submit: list[dict] = [{} for _ in step.tensors]
    for r in step.chains:
        src = m if m is not None else r
        c = step.chains[src]
        work = sum(c.gaps) + c.tail_ns
        f = max(0.0, 1.0 + extra_busy_ns / work) if work > 0 else 1.0
        start = t0 if t0 is not None else step.t0[r]
        seg, waits = [start], []
        for k, gap in enumerate(c.gaps):
            a = seg[-1] + gap * f
            need = [done[i] for i in c.waits_for[k]]
            b = max([a, *need])
            waits.append((a, b))
            seg.append(b)
        end = seg[-1] + c.tail_ns * f
        late = [done[i] for i, t in enumerate(step.tensors) if t.wait.get(src, -1) < 0]
        end = max([end, *late])
        chains[r] = (seg, waits, end, start)
        for i, t in enumerate(step.tensors):
            k, off = t.submit[src]
            submit[i][r] = seg[min(k, len(seg) - 1)] + off * f
    return chains, submit


def _execute(model, s, step, submit):
    """Plan and run the step's collectives: (done per tensor, [(start, end, batch)])."""
    thr = model.fusion_threshold if s.fusion_threshold is None else s.fusion_threshold
    cyc = (model.cycle_time_ms if s.cycle_time_ms is None else s.cycle_time_ms) * 1e6
    cached = [i for i, t in enumerate(step.tensors) if t.cached]
    plain = [i for i, t in enumerate(step.tensors) if not t.cached]
    lat_c = model.latency_ns.get("coordinator", 0.0) * s.latency_scale
    lat_r = model.latency_ns.get("rounds", 0.0) * s.latency_scale
    tick = model.tick_ns * s.latency_scale
    plans = [(d + lat_c, b) for d, b in policy.coordinator(plain, step.tensors, submit, thr, cyc, tick)]
    plans += policy.rounds(cached, step.tensors, submit, thr, cyc, lat_r, tick)
    plans.sort(key=lambda p: p[0])
    free, done, runs = float("-inf"), [0.0] * len(step.tensors), []
    for d, batch in plans:
        t0 = step.tensors[batch[0]]
        nbytes = sum(step.tensors[i].nbytes for i in batch)
        a = max(d, free)
        free = a + cost_of(model, s, t0.backend, t0.op, nbytes)
        runs.append((a, free, batch))
        for i in batch:
            done[i] = free
    return done, runs


def _busy(model: Model, s: Settings, step: Step, runs=None) -> float:
    """The engine's collective time in a step: the run's responses, or the replay's ``runs``
    (on a GPU backend it does not take the training thread's cores: 0)."""
    if runs is None:
        return sum(cost_of(model, Settings(), b, o, n) for _, b, o, n, _, _ in step.responses
                   if b not in GPU_BACKENDS)
    return sum(e - a for a, e, batch in runs if step.tensors[batch[0]].backend not in GPU_BACKENDS)


def replay_step(model: Model, s: Settings, step: Step) -> dict:
    """One step: predicted duration (ns, mean over ranks), chains and collectives at the fixed point."""
    done = [float(max(t.done_ns[r] + step.t0[r] for r in t.done_ns)) for t in step.tensors]
    base_busy, extra = _busy(model, s, step), 0.0
    for _ in range(MAX_ITER):
        chains, submit = _framework(step, done, s.no_straggler, extra)
        new, runs = _execute(model, s, step, submit)
        moved = max((abs(a - b) for a, b in zip(new, done)), default=0.0)
        done, extra = new, _busy(model, s, step, runs) - base_busy
        if moved < 1e3:
            break
    chains, submit = _framework(step, done, s.no_straggler, extra)
    pred = statistics.fmean(end - start for _, _, end, start in chains.values())
    return {"step": step.step, "predicted_ns": pred, "measured_ns": statistics.fmean(step.measured.values()),
            "chains": chains, "runs": runs}


def fit_model(tables, steps: list) -> Model:
    """Costs and dispatch latencies from the run itself."""
    meta = tables.meta
    thr = meta.get("fusion_threshold")
    if thr is None and len(tables.fused_ops):
        t = tables.fused_ops["threshold"].dropna()
        thr = int(t.iloc[0]) if len(t) else None
    size = int(meta.get("size") or (len(steps[0].chains) if steps else 1))
    model = Model(steps, costs.fit(tables.fused_ops), size,
                  int(thr) if thr is not None else 128 << 20,
                  float(meta.get("cycle_time_ms") or 1.0), {},
                  assumed=tuple(k for k, v in (("fusion_threshold", thr),
                                               ("cycle_time_ms", meta.get("cycle_time_ms"))) if v is None))
    if steps:
        cal = steps[::-(-len(steps) // CALIBRATION_STEPS)]   # run-wide figures: a spread sample will do
        model.tick_ns = _fit_tick(model, cal)
        model.latency_ns = _fit_latency(model, cal)
    return model


def _fit_tick(model: Model, steps: list) -> float:
    """The engine tick that makes the replay plan as many responses as the run executed, with
    the measured submissions (a loaded engine thread plans less often than its cycle, so it
    fuses more than an idle one would), by bisection on a log scale; 0 when none is needed."""
    measured = sum(len(s.responses) for s in steps)
    inputs = []
    for step in steps:
        done = [float(max(t.done_ns[r] + step.t0[r] for r in t.done_ns)) for t in step.tensors]
        inputs.append((step, _framework(step, done, False)[1]))

    def count(tick: float) -> int:
        m = replace(model, tick_ns=tick)
        return sum(len(_execute(m, Settings(), st, sub)[1]) for st, sub in inputs)

    if count(0.0) <= measured:
        return 0.0
    lo, hi = 1e3, 1e8   # 1 us .. 100 ms
    if count(hi) > measured:
        return hi
    for _ in range(16):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if count(mid) > measured else (lo, mid)
    return hi


def _fit_latency(model: Model, steps: list) -> dict:
    """The dispatch latency (negotiation, rounds, response delivery: one number for both paths)
    that makes the replay's mean step time the measured one, by bisection (the step time only
    grows with it); 0 when the replay is already slower without it."""
    measured = statistics.fmean(statistics.fmean(s.measured.values()) for s in steps)

    def mean_at(lat: float) -> float:
        m = replace(model, latency_ns={"coordinator": lat, "rounds": lat})
        return statistics.fmean(replay_step(m, Settings(), s)["predicted_ns"] for s in steps)

    lo, hi = 0.0, measured / 4
    if mean_at(lo) >= measured:
        return {"coordinator": 0.0, "rounds": 0.0}
    for _ in range(14):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_at(mid) < measured else (lo, mid)
    return {"coordinator": lo, "rounds": lo}

