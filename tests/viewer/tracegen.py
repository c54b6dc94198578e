"""Hand-written ringscope traces in the documented per-rank format, for LOADER unit tests only.

They follow tracer/vocab.py and the "Tracer contract" of docs/ARCHITECTURE.md: object form, one event
per line, ts/dur in µs relative to the rank's base, async per-tensor lifecycles. Analyses are tested
on real runs (sample_traces/) and real Horovod timelines, not on these.
"""
from __future__ import annotations

import json
from pathlib import Path

from tracer import vocab as V

BASE_EPOCH_NS = 1_790_000_000_000_000_000


def rank_events(rank, size, steps=3, tensors=(("grad.a", 4096), ("grad.b", 1 << 20)), late_rank=None,
                late_us=5000.0, threshold=8 << 20, skip=None):
    """Events of one rank. ``skip=(rank, tensor, step)``: that rank never submits that tensor then."""
    ev = []
    t = 100.0
    resp = 0
    for step in range(steps):
        step_start = t
        submits = {}
        for name, nbytes in tensors:
            if skip and skip[0] == rank and skip[1] == name and skip[2] == step:
                continue
            delay = late_us if rank == late_rank else 0.0
            ts = t + delay + 10.0 * rank
            submits[name] = ts
            a = {"tensor": name, "op": "ALLREDUCE", "bytes": nbytes, "dtype": "float32",
                 "shape": [nbytes // 4], "reduce_op": "Sum", "process_set": 0, "step": step}
            ev.append({"ph": "i", "name": V.SUBMIT, "cat": V.CAT_FRAMEWORK, "pid": rank, "tid": 1, "ts": ts,
                       "s": "t", "args": {"tensor": name, "step": step}})
            ev.append({"ph": "b", "name": name, "cat": V.CAT_TENSOR, "id2": {"local": name}, "pid": rank, "tid": 1,
                       "ts": ts, "args": a})
            ev.append({"ph": "b", "name": "NEGOTIATE_ALLREDUCE", "cat": V.CAT_TENSOR, "id2": {"local": name}, "pid": rank,
                       "tid": 1, "ts": ts})
        if skip and skip[2] == step:
            break  # the job hangs here: nobody completes this step
        ready = t + (late_us if late_rank is not None else 0.0) + 10.0 * (size - 1) + 50.0
        if rank == 0:
            for name, _ in tensors:
                for r in range(size):
                    tr = t + (late_us if r == late_rank else 0.0) + 10.0 * r + 20.0
                    ev.append({"ph": "i", "name": V.READY, "cat": V.CAT_NEGOTIATION, "pid": 0, "tid": 2,
                               "ts": tr, "s": "t", "args": {"tensor": name, "rank": r, "step": step}})
        names = [n for n, _ in tensors]
        total = sum(b for _, b in tensors)
        start = ready + 30.0
        for name in names:
            ev.append({"ph": "e", "name": "NEGOTIATE_ALLREDUCE", "cat": V.CAT_TENSOR, "id2": {"local": name}, "pid": rank,
                       "tid": 1, "ts": ready})
            ev.append({"ph": "b", "name": V.QUEUE, "cat": V.CAT_TENSOR, "id2": {"local": name}, "pid": rank, "tid": 1,
                       "ts": ready})
            ev.append({"ph": "e", "name": V.QUEUE, "cat": V.CAT_TENSOR, "id2": {"local": name}, "pid": rank, "tid": 1,
                       "ts": start})
        comm = 200.0 + total / 1000.0
        end = start + comm + 40.0
        fa = {"response": resp, "tensors": names, "count": len(names), "bytes": total, "dtype": "float32",
              "op": "ALLREDUCE", "reduce_op": "Sum", "backend": "ring", "threshold": threshold,
              "process_set": 0, "step": step}
        ev.append({"ph": "X", "name": V.FUSED_RESPONSE, "cat": V.CAT_FUSION, "pid": rank, "tid": 3, "ts": start,
                   "dur": end - start, "args": fa})
        ev.append({"ph": "X", "name": V.MEMCPY_IN_FUSION_BUFFER, "cat": V.CAT_MEMCPY, "pid": rank, "tid": 3,
                   "ts": start, "dur": 20.0, "args": {"response": resp}})
        ev.append({"ph": "X", "name": V.RING_ALLREDUCE, "cat": V.CAT_COMM, "pid": rank, "tid": 4,
                   "ts": start + 20.0, "dur": comm, "args": {"response": resp, "bytes": total, "backend": "ring",
                                                            "size": size}})
        ev.append({"ph": "X", "name": V.MEMCPY_OUT_FUSION_BUFFER, "cat": V.CAT_MEMCPY, "pid": rank, "tid": 3,
                   "ts": start + 20.0 + comm, "dur": 20.0, "args": {"response": resp}})
        for name in names:
            ev.append({"ph": "e", "name": name, "cat": V.CAT_TENSOR, "id2": {"local": name}, "pid": rank, "tid": 1,
                       "ts": end, "args": {"response": resp}})
        sync0 = max(submits.values()) + 5.0
        ev.append({"ph": "X", "name": V.SYNCHRONIZE, "cat": V.CAT_FRAMEWORK, "pid": rank, "tid": 1, "ts": sync0,
                   "dur": end - sync0, "args": {"tensors": names, "step": step}})
        ev.append({"ph": "C", "name": V.COUNTER_QUEUE_DEPTH, "cat": V.CAT_COUNTER, "pid": rank, "ts": sync0,
                   "args": {"value": len(names)}})
        ev.append({"ph": "X", "name": V.CYCLE, "cat": V.CAT_CYCLE, "pid": rank, "tid": 5, "ts": start,
                   "dur": end - start, "args": {"cycle": step}})
        t = end + 100.0
        ev.append({"ph": "X", "name": V.STEP, "cat": V.CAT_FRAMEWORK, "pid": rank, "tid": 1, "ts": step_start,
                   "dur": t - step_start, "args": {"step": step}})
        resp += 1
    ev.sort(key=lambda e: e["ts"])
    return ev


def write_rank(path, rank, size, events, offset_ns=0, close=True, gz=False, shutdown=True):
    """Write one rank's trace file; ``offset_ns`` is its recorded clock offset (its wall minus rank 0's)."""
    meta = {"format_version": 1, "rank": rank, "size": size, "local_rank": rank, "host": "testhost",
            "pid": 1000 + rank, "backend": "ring", "fusion_threshold": 8 << 20, "cycle_time_ms": 1.0,
            "base_epoch_ns": BASE_EPOCH_NS + offset_ns, "clock_offset_ns": offset_ns,
            "clock_offset_uncertainty_ns": 2000}
    lines = ['{"otherData": {"ringscope": ' + json.dumps(meta) + '},', '"traceEvents": [']
    body = [json.dumps({"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}})]
    body += [json.dumps(e) for e in events]
    if shutdown:
        body.append(json.dumps({"ph": "i", "name": V.SHUTDOWN, "cat": V.CAT_META, "pid": rank, "tid": 1,
                                "ts": events[-1]["ts"] + 1 if events else 1, "s": "t",
                                "args": {"clock_offset_ns": offset_ns, "events_dropped": 0}}))
    text = "\n".join(lines) + "\n" + ",\n".join(body) + ("\n]}\n" if close else ",\n")
    data = text.encode()
    p = Path(path)
    if gz:
        import gzip
        data = gzip.compress(data)
    p.write_bytes(data)
    return p


def write_run(directory, size=4, steps=3, late_rank=None, skip=None, offsets=None, gz=False, **kw):
    """A run directory with one trace per rank; returns the paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(size):
        off = (offsets or {}).get(r, 0)
        ev = rank_events(r, size, steps=steps, late_rank=late_rank, skip=skip, **kw)
        # a rank's local clock reads ``off`` later than rank 0's: shift its local ts so that true
        # instants stay equal once the offset is applied
        paths.append(write_rank(d / (f"rank-{r}.json" + (".gz" if gz else "")), r, size, ev, offset_ns=off,
                                gz=gz))
    return paths
