"""Replay a run's steps under changed settings (:class:`Settings`) to a fixed point per step (docs/WHATIF.md)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

import numpy as np

from viewer.whatif import costs, policy
from viewer.whatif.rebuild import CACHED_ID_BASE, Step

MAX_ITER = 40
CALIBRATION_STEPS = 40   # at most this many steps, spread over the run, fit the tick and latency
GPU_BACKENDS = ("nccl",)
ROUND_QUANTILE = 0.1     # of the cached responses' delays after their last submission: a round alone
QUEUED_NS = 200_000      # a response that starts this soon after the one before had queued behind it


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
    tick_ns: float = 0.0        # how often the coordinator got to plan (fitted): at least the cycle
    round_ns: float = 0.0       # a bit round's completion after its last post (measured)
    cores: dict = field(default_factory=dict)   # rank -> (its group sharing CPUs, how many CPUs); {}: unknown
    assumed: tuple = ()         # settings the trace does not record (defaults assumed)
    headline: dict = field(default_factory=dict)   # the run's headline figures shown beside the replay's

    def effective(self, s: Settings) -> Settings:
        """``s`` with the run's own settings where it keeps them."""
        return replace(s, fusion_threshold=self.fusion_threshold if s.fusion_threshold is None else s.fusion_threshold,
                       cycle_time_ms=self.cycle_time_ms if s.cycle_time_ms is None else s.cycle_time_ms,
                       ranks=s.ranks or self.size)


def fit_of(model: Model, s: Settings, backend: str, op: str) -> costs.Fit | None:
    """The cost fit of a response of this backend and op under ``s`` (None: no fit for the op)."""
    f = model.fits.get((backend, op)) or next((v for k, v in model.fits.items() if k[1] == op), None)
    if f is not None and s.ranks and s.ranks != model.size:
        f = costs.ring_extrapolate(f, model.size, s.ranks)
    return f


def _busy_share(spans: tuple, a: float, e: float) -> float:
    """The share of ranks doing CPU work during [a, e] (``spans``: from :func:`_span_arrays`)."""
    starts, ends, ranks, n = spans
    if not n or e <= a:
        return 0.0
    ov = np.maximum(np.minimum(ends, e) - np.maximum(starts, a), 0.0)
    return sum(float(ov[r].sum()) for r in ranks) / (n * (e - a))


def _span_arrays(chains: dict) -> tuple:
    """Every rank's CPU spans in one array: (starts, ends, each rank's slice of them if any, how many ranks)."""
    per = [len(ch[4]) for ch in chains.values()]
    cut = np.cumsum([0, *per]).tolist()
    spans = np.array([sp for ch in chains.values() for sp in ch[4]], dtype=float).reshape(-1, 2)
    return spans[:, 0], spans[:, 1], [slice(a, b) for a, b in zip(cut, cut[1:]) if b > a], len(per)


def _median_rank(step: Step) -> int:
    work = {r: sum(c.gaps) + c.tail_ns for r, c in step.chains.items()}
    ranked = sorted(work, key=work.get)
    return ranked[(len(ranked) - 1) // 2]


def _framework(step: Step, done: list, no_straggler: bool, extra_ns: dict | None = None):
    """Per rank (segment starts, waits, end, start, CPU spans), and each tensor's submission per rank."""
    m = _median_rank(step) if no_straggler else None
    chains: dict = {}
    submit: list[dict] = [{} for _ in step.tensors]
    for r in step.chains:
        src = r if m is None else m
        c = step.chains[src]
        work = sum(c.cpu_ns(k) for k in range(len(c.gaps) + 1))
        extra = (extra_ns or {}).get(r, 0.0)
        g = max(-1.0, extra / work) if work > 0 else 0.0   # stretch of each ns of CPU work
        start = step.t0[src]
        seg, waits, cpu = [start], [], []
        for k, gap in enumerate(c.gaps):
            _spans(c, k, seg[-1], g, cpu)
            a = seg[-1] + gap + g * c.cpu_ns(k)
            waits.append((a, max([a, *map(done.__getitem__, c.waits_for[k])])))
            seg.append(waits[-1][1])
        _spans(c, len(c.gaps), seg[-1], g, cpu)
        end = max([seg[-1] + c.tail_ns + g * c.cpu_ns(len(c.gaps)), *map(done.__getitem__, c.unwaited)])
        chains[r] = (seg, waits, end, start, cpu)
        for sub, t in zip(submit, step.tensors):
            k, off, before = t.submit[src]
            sub[r] = seg[k] + off + g * before
    return chains, submit


def _spans(c, k: int, at: float, g: float, out: list) -> None:
    """Append segment ``k``'s CPU spans (absolute, stretched by ``g``) starting at ``at``."""
    if c.cpu is None:
        length = c.gaps[k] if k < len(c.gaps) else c.tail_ns
        out.append((at, at + length * (1 + g)))
        return
    for a, b in c.cpu[k]:
        out.append((at + a + g * c.cpu_before(k, a), at + b + g * c.cpu_before(k, b)))


def _overlap(spans: list, runs: list) -> float:
    """Total time the ``runs`` [(start, end[, weight per ns])] overlap the ``spans`` [(start, end)]."""
    if not spans or not runs:
        return 0.0
    a, r = np.asarray(spans, dtype=float), np.asarray(runs, dtype=float)
    ov = np.clip(np.minimum(a[:, 1:], r[:, 1]) - np.maximum(a[:, :1], r[:, 0]), 0.0, None)
    return float((ov * r[:, 2]).sum() if r.shape[1] > 2 else ov.sum())


def measured_done(step: Step) -> list:
    """Each tensor's completion as the run measured it (its last rank's, on the common axis)."""
    return [float(max(t.done_ns[r] + step.t0[r] for r in t.done_ns)) for t in step.tensors]


def measured_chains(step: Step):
    """The step's chains and submissions with each tensor done when the run measured it."""
    return _framework(step, measured_done(step), False)


def _idle_from(step: Step, chains: dict) -> dict:
    """Per rank: where its engine's idle spell before the step began."""
    return {r: ch[3] - step.chains[r].tail_ns for r, ch in chains.items()}


def _execute(model, s, step, submit, spans=None, idle_from=None):
    """Plan and run the step's collectives: (done per tensor, [(start, end, batch)], CPU-backend runs)."""
    eff = model.effective(s)
    thr, cyc = eff.fusion_threshold, eff.cycle_time_ms * 1e6
    lat_c = model.latency_ns.get("coordinator", 0.0) * s.latency_scale
    lat_r = model.latency_ns.get("rounds", 0.0) * s.latency_scale
    tick = model.tick_ns * s.latency_scale
    free, done, runs, cpu = float("-inf"), [0.0] * len(step.tensors), [], []

    def run(d: float, batch: list, seen: float = 0.0) -> float:
        nonlocal free
        t0 = step.tensors[batch[0]]
        nbytes = sum(step.tensors[i].nbytes for i in batch)
        a = max(d, free)
        on_cpu = t0.backend not in GPU_BACKENDS
        f = fit_of(model, s, t0.backend, t0.op)
        own = f.cost_ns(nbytes, s.bandwidth_scale, s.latency_scale) if f else 0.0
        # the share of ranks computing meanwhile only matters to a fit with a contention term
        busy = _busy_share(spans, a, a + own) if spans is not None and on_cpu and f and f.contention else 0.0
        free = a + (f.cost_ns(nbytes, s.bandwidth_scale, s.latency_scale, busy) if busy else own)
        runs.append((a, free, batch))
        if on_cpu:
            cpu.append((a, free, own / (free - a) if free > a else 1.0))
        for i in batch:
            done[i] = free + seen
        return free

    cached = [i for i, t in enumerate(step.tensors) if t.cached]
    plain = [i for i, t in enumerate(step.tensors) if not t.cached]
    for d, b in policy.coordinator(plain, step.tensors, submit, thr, cyc, tick):
        run(d + lat_c, b)
    # the rounds' latency is the engine's; the framework sees a cached op's end lat_r later
    rnd = model.round_ns * s.latency_scale
    policy.rounds(cached, step.tensors, submit, idle_from or {}, thr, cyc, rnd, lambda d, b: run(d, b, lat_r))
    return done, runs, cpu


def _crowding(model: Model, chains: dict) -> dict:
    """Per rank: how many ranks sharing its CPUs (itself included) compute, on average, while it does."""
    out = {}
    for r, ch in chains.items():
        own = sum(b - a for a, b in ch[4])
        group = model.cores.get(r, (None,))[0]
        others = sum(_overlap(ch[4], o[4]) for q, o in chains.items()
                     if q != r and model.cores.get(q, (None,))[0] == group)
        out[r] = 1.0 + others / own if own > 0 else 1.0
    return out


def _slowdown(model: Model, r: int, crowd: float) -> float:
    """How much slower rank ``r``'s CPU work runs with ``crowd`` ranks computing on its CPUs (1: they fit)."""
    n = model.cores.get(r, (None, 0))[1]
    return max(1.0, crowd / n) if n else 1.0


def replay_step(model: Model, s: Settings, step: Step) -> dict:
    """One step: predicted duration (ns, mean over ranks), chains and collectives at the fixed point."""
    done = measured_done(step)
    # the reference: per rank, the collective time during its CPU work and its crowding as the run had them
    was_chains, was_submit = measured_chains(step)
    was_runs = _execute(model, Settings(), step, was_submit, _span_arrays(was_chains), _idle_from(step, was_chains))[2]
    base, crowd = {r: _overlap(ch[4], was_runs) for r, ch in was_chains.items()}, _crowding(model, was_chains)
    src = _median_rank(step) if s.no_straggler else None
    extra: dict = {}
    for _ in range(MAX_ITER):
        chains, submit = _framework(step, done, s.no_straggler, extra)
        new, runs, cpu_runs = _execute(model, s, step, submit, _span_arrays(chains), _idle_from(step, chains))
        moved = max((abs(a - b) for a, b in zip(new, done)), default=0.0)
        now = _crowding(model, chains) if model.cores else {}
        target = {}
        for r, ch in chains.items():
            was = src if src is not None else r
            target[r] = _overlap(ch[4], cpu_runs) - base[was]
            if now:   # more (fewer) ranks computing at once than in the run: the cores are shared
                c = step.chains[was]
                work = sum(c.cpu_ns(k) for k in range(len(c.gaps) + 1))
                target[r] += (_slowdown(model, r, now[r]) / _slowdown(model, was, crowd[was]) - 1) * work
        shift = max((abs(target[r] - extra.get(r, 0.0)) for r in target), default=0.0)
        done, extra = new, target
        if moved < 1e3 and shift < 1e3:
            break
    chains, submit = _framework(step, done, s.no_straggler, extra)
    pred = statistics.fmean(ch[2] - ch[3] for ch in chains.values())
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
    cyc = meta.get("cycle_time_ms")
    model = Model(steps, costs.fit(tables.fused_ops, _measured_busy(steps)), size,
                  128 << 20 if thr is None else int(thr), float(cyc or 1.0), {}, cores=_cores(tables),
                  assumed=tuple(k for k, v in (("fusion_threshold", thr), ("cycle_time_ms", cyc)) if v is None))
    if steps:
        cal = steps[::-(-len(steps) // CALIBRATION_STEPS)]   # run-wide figures: a spread sample will do
        model.tick_ns = _fit_tick(model, cal)
        model.round_ns = _round_latency(cal)
        model.latency_ns = _fit_latency(model, cal)
    return model


def _cores(tables) -> dict:
    """Per rank: (its group of ranks that may share its CPUs, how many CPUs); {} when unknown."""
    ranks = tables.ranks
    if not len(ranks):
        return {}
    hosts = ranks["host"].astype(object).where(ranks["host"].notna(), None)
    if "cpu_set" in ranks and ranks["cpu_set"].notna().all():
        return {int(r): ((h, s), s.count(",") + 1) for r, h, s in zip(ranks["rank"], hosts, ranks["cpu_set"])}
    cpus = tables.meta.get("cpus")
    if isinstance(cpus, int) and not isinstance(cpus, bool) and cpus > 0:
        return {int(r): ((h, None), cpus) for r, h in zip(ranks["rank"], hosts)}
    return {}


def _measured_busy(steps: list) -> dict:
    """Per measured response: the share of ranks doing CPU work while it ran."""
    return {resp: _busy_share(spans, start, start + cost)
            for step, spans in ((s, _span_arrays(measured_chains(s)[0])) for s in steps)
            for resp, _, _, _, start, cost in step.responses}


def _fit_tick(model: Model, steps: list) -> float:
    """The coordinator's tick (bisected; 0 if none is needed) that plans as many responses as the run did."""
    measured = sum(1 for s in steps for r in s.responses if r[0] < CACHED_ID_BASE)
    inputs = [(step, measured_chains(step)[1]) for step in steps]

    def count(tick: float) -> int:
        m = replace(model, tick_ns=tick)
        return sum(1 for st, sub in inputs for _, _, b in _execute(m, Settings(), st, sub)[1]
                   if not st.tensors[b[0]].cached)

    if count(0.0) <= measured:
        return 0.0
    lo, hi = 1e3, 1e8   # 1 us .. 100 ms
    if count(hi) > measured:
        return hi
    for _ in range(16):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if count(mid) > measured else (lo, mid)
    return hi


def _round_latency(steps: list) -> float:
    """How long a bit round completes after its last post (0: unknown), from the cached responses."""
    out = []
    for step in steps:
        sub = measured_chains(step)[1]
        last: dict = {}
        for i, t in enumerate(step.tensors):
            last[t.response] = max(last.get(t.response, float("-inf")), max(sub[i].values()))
        prev = float("-inf")
        for resp, _, _, _, start, cost in sorted(step.responses, key=lambda x: x[4]):
            if resp >= CACHED_ID_BASE and resp in last and start - prev > QUEUED_NS:
                out.append(max(0.0, start - last[resp]))
            prev = max(prev, start + cost)
    return float(np.quantile(out, ROUND_QUANTILE)) if out else 0.0


def _fit_latency(model: Model, steps: list) -> dict:
    """Per path, the dispatch latency that makes the replay's mean step time the measured one (bisected)."""
    groups = {"coordinator": [s for s in steps if 2 * sum(t.cached for t in s.tensors) < len(s.tensors)]}
    groups["rounds"] = [s for s in steps if s not in groups["coordinator"]]
    lat = {"coordinator": 0.0, "rounds": 0.0}
    for key in ("coordinator", "rounds"):
        part = groups[key]
        if not part:
            continue
        measured = statistics.fmean(statistics.fmean(s.measured.values()) for s in part)

        def mean_at(x: float, key=key, part=part) -> float:
            m = replace(model, latency_ns={**lat, key: x})
            return statistics.fmean(replay_step(m, Settings(), s)["predicted_ns"] for s in part)

        lo, hi = 0.0, measured / 4
        if mean_at(lo) < measured:
            for _ in range(14):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if mean_at(mid) < measured else (lo, mid)
        lat[key] = lo
    for key, other in (("coordinator", "rounds"), ("rounds", "coordinator")):
        if not groups[key]:
            lat[key] = lat[other]
    return lat
