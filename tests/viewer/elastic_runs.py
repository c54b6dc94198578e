"""Elastic runs (docs/ELASTIC.md) written by the REAL recorder (tracer.timeline.TimelineRecorder) with every
span at a chosen time: one ``gen-NNN/`` of rank traces per generation and the driver's ``elastic.json``,
so the loader, the recoveries analysis, the summary and the dashboard meet a run laid out as the driver
lays it out, with costs the tests know exactly.

Each generation runs whole steps of ``step_ms`` (one fused allreduce of three gradients, SYNCHRONIZE, STEP),
commits every ``commit_every`` steps (ELASTIC_COMMIT on every rank) and ends:
- "lost": rank ``lost_rank`` dies ``fail_after_ms`` into the step after the generation's last whole one;
  the driver notices ``detect_ms`` later and kills the others (every trace of the generation is cut);
- "added": the discovery script reported a host, so the world ends cleanly at its last commit.
A new generation's ranks start ``start_ms`` after the relaunch, register ``register_ms`` later
(re-formed), restore the state in ``restore_ms`` (ELASTIC_RESTORE), run their first step from the last
commit's step + 1, and record ELASTIC_RESET from init to that step's end.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from tests.viewer.phase_runs import GRADS, _Op
from tracer import vocab as V
from tracer.config import TimelineSettings
from tracer.timeline import TimelineRecorder

MS = 1_000_000
_EPOCH_FIELDS = ("last_commit_epoch_ns", "failed_epoch_ns", "detected_epoch_ns", "relaunched_epoch_ns",
                 "reformed_epoch_ns", "restored_epoch_ns", "first_step_end_epoch_ns")


def write_elastic_run(out: Path, worlds=((4, 6), (3, 8)), kinds=("lost",), step_ms=(40.0, 30.0),
                      commit_every: int = 4, lost_rank: int = 2, fail_after_ms: float = 10.0,
                      detect_ms: float = 10.0, relaunch_ms: float = 40.0, start_ms: float = 1000.0,
                      register_ms: float = 100.0, restore_ms: float = 100.0,
                      no_reset_slice: tuple = ()) -> dict:
    """Write the run into ``out`` and return its elastic.json (as written) plus ``"expected"``: per reset,
    the costs in ms the recoveries analysis must find.

    ``worlds``: (size, whole steps) per generation; ``kinds``: how each generation but the last ends
    ("lost" or "added"); ``step_ms``: step length per generation; ``no_reset_slice``: (generation, rank)
    pairs whose ELASTIC_RESET slice is left out (a rank that died before its first step, say)."""
    out.mkdir(parents=True, exist_ok=True)
    settings = TimelineSettings(spec=str(out) + "/", flush_interval_s=60.0, counters_hz=0.0)
    t0 = time.perf_counter_ns() + MS
    epoch0 = time.time_ns() + MS   # wall clock at t0 (what the driver's time.time_ns() would read)

    def epoch(t):
        return epoch0 + (t - t0)

    gens, resets, expected = [], [], []
    t = t0
    launch = t0 - 50 * MS   # the driver starts mpiexec before any rank's init
    step = 0
    last_commit = (None, None)   # (step, time)
    pending = None               # the reset that starts the next generation
    resp = 0
    for g, (size, n_steps) in enumerate(worlds):
        d = out / f"gen-{g:03d}"
        d.mkdir()
        recs = [TimelineRecorder({"rank": r, "size": size, "backend": "ring", "fusion_threshold": 1 << 20,
                                  "format_version": V.FORMAT_VERSION, "host": "localhost", "pid": 1000 * g + r,
                                  "generation": g}, settings, d / f"rank-{r:05d}.json", step=step)
                   for r in range(size)]
        offs = [epoch0 - (rec.meta["base_epoch_ns"] + (t0 - rec.base_ns)) for rec in recs]  # wall vs ours
        step_base = step
        if pending is not None:   # this world's ranks: init, register, restore, then the first step
            init = t
            reformed = init + int(register_ms * MS)
            restored = reformed + int(restore_ms * MS)
            for r, rec in enumerate(recs):
                rec.complete(V.TID_FRAMEWORK, V.ELASTIC_RESTORE, V.CAT_ELASTIC, reformed + offs[r], restored + offs[r],
                             {"bytes": 4096})
            t = restored
        first_step_end = None
        for k in range(n_steps):
            end = t + int(step_ms[g] * MS)
            names = [n for n, _, _ in GRADS]
            sub = t + int(0.5 * (end - t))
            done = end - int(0.2 * (end - t))
            for r, rec in enumerate(recs):
                rec.step = step
                tt = t + offs[r]
                rec.complete(V.TID_FUSION, V.FUSED_RESPONSE, V.CAT_FUSION, sub + offs[r], done + offs[r],
                             {V.ARG_RESPONSE: resp, V.ARG_TENSORS: names, V.ARG_COUNT: len(names),
                              V.ARG_BYTES: sum(b for _, b, _ in GRADS), V.ARG_OP: V.ALLREDUCE,
                              V.ARG_DTYPE: "float32", V.ARG_BACKEND: "ring", V.ARG_THRESHOLD: 1 << 20,
                              V.ARG_QUEUE_NS: 0})
                rec.complete(V.TID_BACKEND, V.RING_ALLREDUCE, V.CAT_COMM, sub + offs[r] + 1000, done + offs[r] - 1000,
                             {V.ARG_RESPONSE: resp, V.ARG_BYTES: sum(b for _, b, _ in GRADS)})
                rec.ops_done([_Op(rec, n, b, sub + offs[r], step) for n, b, _ in GRADS], done + offs[r])
                rec.complete(V.TID_FRAMEWORK, V.SYNCHRONIZE, V.CAT_FRAMEWORK, sub + offs[r], done + offs[r],
                             {V.ARG_TENSOR: names[-1]})
                if (step + 1) % commit_every == 0:
                    rec.complete(V.TID_FRAMEWORK, V.ELASTIC_COMMIT, V.CAT_ELASTIC, end + offs[r] - MS, end + offs[r],
                                 {"bytes": 4096, "step": step})
                rec.complete(V.TID_FRAMEWORK, V.STEP, V.CAT_FRAMEWORK, tt, end + offs[r])
            if (step + 1) % commit_every == 0:
                last_commit = (step, end)
            if k == 0 and pending is not None:
                first_step_end = end
            resp += 1
            step += 1
            t = end
        if pending is not None:   # ELASTIC_RESET on every rank of the new world, with the driver's record
            rec0 = pending
            rec0.update(reformed_epoch_ns=epoch(reformed), restored_epoch_ns=epoch(restored),
                        first_step_end_epoch_ns=epoch(first_step_end))
            ms = _costs(rec0)
            args = {k: v for k, v in rec0.items() if k not in _EPOCH_FIELDS}
            args.update(ms, generation=g)
            for r, rec in enumerate(recs):
                if (g, r) not in no_reset_slice:
                    rec.complete(V.TID_FRAMEWORK, V.ELASTIC_RESET, V.CAT_ELASTIC, init + offs[r],
                                 first_step_end + offs[r], args)
            resets.append(rec0)
            expected.append(ms)
            pending = None
        last = g == len(worlds) - 1
        kind = None if last else kinds[g]
        if kind == "lost":
            failed = t + int(fail_after_ms * MS)
            detected = failed + int(detect_ms * MS)
            for r, rec in enumerate(recs):   # the step in flight when rank lost_rank died
                rec.step = step
                rec.complete(V.TID_FRAMEWORK, V.DATA_WAIT, V.CAT_PHASE, t + offs[r],
                             (failed if r == lost_rank else detected) + offs[r])
                rec.flush()                  # killed: never closed
            t_end = detected
            nxt = worlds[g + 1][0]
            pending = {"lost": [{"rank": lost_rank, "host": "localhost", "pid": 1000 * g + lost_rank}],
                       "added": [], "cause": f"rank {lost_rank} (host localhost, pid {1000 * g + lost_rank}) "
                       "exited: killed by signal 9"}
        else:
            assert last or last_commit[1] == t, "an added host joins at a commit: end the world on one"
            failed = detected = t   # the interrupt's commit (the last step's), then goodbye
            for rec in recs:
                rec.close()
            t_end = t
            if not last:
                pending = {"lost": [], "added": [{"host": "h2", "slots": worlds[g + 1][0] - size}],
                           "cause": f"host h2 added by the discovery script ({worlds[g + 1][0] - size} slot(s))"}
                nxt = worlds[g + 1][0]
        gens.append({"generation": g, "size": size, "hosts": [f"localhost:{size}"], "start_epoch_ns": epoch(launch),
                     "end_epoch_ns": epoch(t_end), "end": "done" if last else
                     ("failure" if kind == "lost" else "hosts_updated"), "step_base": step_base})
        if pending is not None:
            relaunched = detected + int(relaunch_ms * MS)
            pending = {"generation_before": g, "generation_after": g + 1, "kind": kind, "cause": pending["cause"],
                       "lost": pending["lost"], "added": pending["added"], "size_before": size, "size_after": nxt,
                       "hosts_before": [f"localhost:{size}"], "hosts_after": [f"localhost:{nxt}"],
                       "last_commit_epoch_ns": epoch(last_commit[1]), "last_commit_step": last_commit[0],
                       "failed_epoch_ns": epoch(failed), "detected_epoch_ns": epoch(detected),
                       "relaunched_epoch_ns": epoch(relaunched)}
            step = last_commit[0] + 1
            launch = relaunched
            t = relaunched + int(start_ms * MS)
        elif not last:
            raise ValueError(kind)
    manifest = {"elastic_format": 1, "min_np": 2, "max_np": 4, "generations": gens, "resets": resets}
    (out / "elastic.json").write_text(json.dumps(manifest, indent=1))
    return {**manifest, "expected": expected}


def _costs(r: dict) -> dict:
    def ms(a, b):
        return (r[b] - r[a]) / 1e6

    return {"detect_ms": ms("failed_epoch_ns", "detected_epoch_ns"),
            "reform_ms": ms("detected_epoch_ns", "reformed_epoch_ns"),
            "restore_ms": ms("reformed_epoch_ns", "restored_epoch_ns"),
            "first_step_ms": ms("restored_epoch_ns", "first_step_end_epoch_ns"),
            "lost_ms": ms("failed_epoch_ns", "first_step_end_epoch_ns"),
            "redone_ms": ms("last_commit_epoch_ns", "failed_epoch_ns")}
