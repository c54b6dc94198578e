"""Runs with framework phases written by the REAL recorder (tracer.timeline.TimelineRecorder), with
every span placed at a chosen time, for the breakdown, root-cause and critical-path tests.

Each rank's step is DATA_WAIT -> FORWARD -> BACKWARD (submitting the gradients at fixed fractions of
it) -> OPTIMIZER_STEP (SYNCHRONIZE until the fused allreduce is done, then the update), as the
runtime's DistributedOptimizer writes it; the ranks are coupled only through that allreduce, which
starts when the last rank submitted its last gradient. Every phase gets seeded noise, so the
analyses meet medians of noisy steps, not exact numbers.
"""
from __future__ import annotations

import random
import time
from pathlib import Path

from tracer import vocab as V
from tracer.config import TimelineSettings
from tracer.timeline import TimelineRecorder

MS = 1_000_000
GRADS = (("grad.fc2", 4096, 0.3), ("grad.fc1", 65536, 0.7), ("grad.emb", 16384, 1.0))  # name, bytes, at
BASE = {"data_wait": 2.0, "forward": 10.0, "backward": 20.0, "optimizer": 3.0}     # ms per step


class _Op:
    """What ``ops_done`` reads of a runtime op (tracer/recorder.py, OPS)."""

    def __init__(self, rec, name, nbytes, submit_ns, step):
        self.name = name
        self.trace_key = (name, V.ALLREDUCE, nbytes, "float32", (nbytes // 4,), "Sum", 0, 0)
        self.submit_ns = submit_ns
        self.stamp = (rec, step)


def write_run(out: Path, size: int = 4, steps: int = 12, slow: dict | None = None, phases: bool = True,
              noise: float = 0.05, seed: int = 0, counters: dict | None = None, comm_ms: float = 2.0,
              gap_ms: dict | None = None, hosts: list[str] | None = None,
              cross_frac: float | None = None, checkpoint_ms: dict | None = None,
              cpu_sets: dict | None = None) -> Path:
    """Write ``size`` rank traces into ``out`` and return it.

    ``slow``: ``{rank: {phase: extra_ms}}`` (phase one of BASE's keys); ``phases``: False writes no
    phase spans at all (a script without wrap_loader/watch); ``counters``: ``{rank: {name: value}}``
    counter values (cpu_pct 95, rss_mb 800 and load1 2 otherwise), sampled every 5 ms;
    ``gap_ms``: ``{rank: ms}`` of untraced work at each step's start (no phase covers it);
    ``hosts``: each rank's host (run meta host, local and cross ranks); ``cross_frac``: the allreduce
    runs hierarchically (docs/MULTIHOST.md): every rank's CROSS_HOST_ALLREDUCE of its shard (the
    buffer over its host's ranks) takes that fraction of it, between INTRA_HOST_REDUCE and
    INTRA_HOST_BROADCAST. ``checkpoint_ms``: ``{rank: ms}`` of a CHECKPOINT phase at each step's end,
    after the optimizer step (hvd.timeline.checkpoint around a save). ``cpu_sets``: ``{rank: [cpu ids]}``
    each rank's CPUs (run meta ``cpus`` and ``cpu_set``, as the tracer writes its affinity); none by default.
    """
    out.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(seed)
    slow, counters, gap_ms, checkpoint_ms = slow or {}, counters or {}, gap_ms or {}, checkpoint_ms or {}
    settings = TimelineSettings(spec=str(out) + "/", flush_interval_s=60.0)
    recs = [TimelineRecorder({"rank": r, "size": size, "backend": "ring", "fusion_threshold": 1 << 20,
                              "format_version": V.FORMAT_VERSION, **_layout(hosts, r),
                              "hierarchical_allreduce": cross_frac is not None,
                              **({"cpus": len(cpu_sets[r]), "cpu_set": list(cpu_sets[r])} if cpu_sets else {})},
                             settings, out / f"rank-{r:05d}.json")
            for r in range(size)]
    t = [time.perf_counter_ns() + MS] * size   # every rank's step starts together
    resp = 0
    for step in range(steps):
        plan = []
        for r in range(size):
            d = {k: (v + slow.get(r, {}).get(k, 0.0)) * (1 + rnd.uniform(-noise, noise)) * MS
                 for k, v in BASE.items()}
            t0 = t[r] + int(gap_ms.get(r, 0.0) * MS)
            fw0 = t0 + int(d["data_wait"])
            bw0 = fw0 + int(d["forward"])
            bw1 = bw0 + int(d["backward"])
            plan.append((t0, fw0, bw0, bw1, d["optimizer"]))
        start = max(p[3] for p in plan) + int(0.2 * MS)   # the fused allreduce: after the last submit
        done = start + int(comm_ms * MS * (1 + rnd.uniform(-noise, noise)))
        names = [g[0] for g in GRADS]
        for r, rec in enumerate(recs):
            t0, fw0, bw0, bw1, opt = plan[r]
            rec.step = step
            if phases:
                rec.complete(V.TID_FRAMEWORK, V.DATA_WAIT, V.CAT_PHASE, t0, fw0)
                rec.complete(V.TID_FRAMEWORK, V.FORWARD, V.CAT_PHASE, fw0, bw0)
                rec.complete(V.TID_FRAMEWORK, V.BACKWARD, V.CAT_PHASE, bw0, bw1)
            ops = [_Op(rec, n, b, bw0 + int(at * (bw1 - bw0)), step) for n, b, at in GRADS]
            sync_end = max(bw1, done) + int(0.05 * MS)
            end = sync_end + int(opt)
            if r in checkpoint_ms:
                rec.complete(V.TID_FRAMEWORK, V.CHECKPOINT, V.CAT_PHASE, end, end + int(checkpoint_ms[r] * MS))
                end += int(checkpoint_ms[r] * MS)
            rec.complete(V.TID_FUSION, V.FUSED_RESPONSE, V.CAT_FUSION, start, done,
                         {V.ARG_RESPONSE: resp, V.ARG_TENSORS: names, V.ARG_COUNT: len(names),
                          V.ARG_BYTES: sum(g[1] for g in GRADS), V.ARG_OP: V.ALLREDUCE, V.ARG_DTYPE: "float32",
                          V.ARG_BACKEND: "ring", V.ARG_THRESHOLD: 1 << 20, V.ARG_QUEUE_NS: int(0.1 * MS)})
            nbytes = sum(g[1] for g in GRADS)
            rec.complete(V.TID_BACKEND, V.RING_ALLREDUCE, V.CAT_COMM, start + 1000, done - 1000,
                         {V.ARG_RESPONSE: resp, V.ARG_BYTES: nbytes,
                          **({V.ARG_HIERARCHICAL: True} if cross_frac is not None else {})})
            if cross_frac is not None:
                _hierarchical(rec, resp, nbytes, start + 1000, done - 1000, cross_frac,
                              _layout(hosts, r).get("local_size", 1))
            rec.ops_done(ops, done)
            if phases:
                rec.complete(V.TID_FRAMEWORK, V.OPTIMIZER_STEP, V.CAT_PHASE, bw1, end)
            rec.complete(V.TID_FRAMEWORK, V.SYNCHRONIZE, V.CAT_FRAMEWORK, bw1, sync_end,
                         {V.ARG_TENSOR: names[-1]})
            rec.complete(V.TID_FRAMEWORK, V.STEP, V.CAT_FRAMEWORK, t[r], end)
            vals = {V.COUNTER_CPU_PCT: 95.0, V.COUNTER_RSS_MB: 800.0, V.COUNTER_LOAD1: 2.0,
                    **counters.get(r, {})}
            for ts in range(t[r], end, 5 * MS):
                for name, v in vals.items():
                    rec.counter(name, v * (1 + rnd.uniform(-noise, noise)), ts)
            t[r] = end
        resp += 1
    for rec in recs:
        rec.close()
    return out


def _layout(hosts, r) -> dict:
    """Run meta of rank ``r`` on ``hosts`` (each rank's host), as the runtime writes it."""
    if hosts is None:
        return {}
    names = list(dict.fromkeys(hosts))
    mine = [k for k, h in enumerate(hosts) if h == hosts[r]]
    return {"host": hosts[r], "local_rank": mine.index(r), "local_size": len(mine),
            "cross_rank": names.index(hosts[r]), "cross_size": len(names)}


def _hierarchical(rec, resp, nbytes, t0, t1, cross_frac, local_size):
    """The three sub-phases nested in the backend span, as collectives/backends/hierarchical.py writes
    them: reduce-scatter in the host, this rank's shard across hosts, allgather in the host."""
    a = t0 + int((t1 - t0) * (1 - cross_frac) / 2)
    b = t1 - int((t1 - t0) * (1 - cross_frac) / 2)
    args = {V.ARG_RESPONSE: resp, V.ARG_BYTES: nbytes}
    rec.complete(V.TID_BACKEND, V.INTRA_HOST_REDUCE, V.CAT_COMM, t0, a, {**args, V.ARG_LINK: V.LINK_INTRA})
    rec.complete(V.TID_BACKEND, V.CROSS_HOST_ALLREDUCE, V.CAT_COMM, a, b,
                 {**args, V.ARG_BYTES: nbytes // local_size, V.ARG_LINK: V.LINK_CROSS})
    rec.complete(V.TID_BACKEND, V.INTRA_HOST_BROADCAST, V.CAT_COMM, b, t1, {**args, V.ARG_LINK: V.LINK_INTRA})
