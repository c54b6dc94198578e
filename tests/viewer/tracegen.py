"""Hand-written ringscope traces in the documented per-rank format (format 3), for LOADER unit tests only.

They follow tracer/vocab.py and docs/TRACE_FORMAT.md: object form, one event per line, ts/dur in µs
relative to the rank's base, each tensor op on its tensor's own thread (one X, or B/E), the phases on
the response (FUSED_RESPONSE's ``queue_ns``). Analyses are tested on real runs (sample_traces/) and real
Horovod timelines, not on these. ``write_rank(fmt=...)`` only stamps another version in the header.
"""
from __future__ import annotations

import json
from pathlib import Path

from tracer import vocab as V

BASE_EPOCH_NS = 1_790_000_000_000_000_000


def _lifecycle(ev, rank, name, args, submit, done, step, error=None):
    """One tensor op on its tensor's thread (the tid is set by :func:`tensor_threads`): one X, or a B
    and (when it ended: ``done`` not None) an E for ops over 3 ms, as if in flight at a flush."""
    a = {k: v for k, v in args.items() if k != V.ARG_TENSOR}
    err = {V.ARG_ERROR: error} if error else {}
    line = {"ph": "X", "name": name, "cat": V.CAT_TENSOR, "pid": rank, "ts": submit}
    if done is not None and done - submit < 3000.0:
        ev.append({**line, "dur": done - submit, "args": {**a, **err}})
        return
    ev.append({**line, "ph": "B", "args": a})
    if done is not None:
        ev.append({**line, "ph": "E", "ts": done, "args": {"step": step, **err}})


def tensor_threads(events, names=True):
    """Format 3: tensor lifecycle lines without a tid get their tensor's thread (1000 + k, k in order
    of first appearance); with ``names``, metadata lines naming each thread go right before its first
    line (unless the events name it already)."""
    named = {(e.get("pid"), e.get("tid")) for e in events if e.get("name") == "thread_name"}
    tids, out = {}, []
    for e in events:
        if e.get("cat") == V.CAT_TENSOR and e.get("ph") in ("X", "B", "E"):
            tid = tids.get(e["name"]) or e.get("tid") or 1000 + len(tids)
            if e["name"] not in tids and names and (e["pid"], tid) not in named:
                out.append({"ph": "M", "name": "thread_name", "pid": e["pid"], "tid": tid,
                            "args": {"name": e["name"]}})
                out.append({"ph": "M", "name": "thread_sort_index", "pid": e["pid"], "tid": tid,
                            "args": {"sort_index": tid}})
            tids[e["name"]] = tid
            e = {**e, "tid": tid}
        out.append(e)
    return out


def _broadcasts(ev, rank, tensors, t, resp):
    """Initial broadcasts of every tensor (step -1, one response each, like the runtime's at init);
    returns (time after them, next response id)."""
    for name, nbytes in tensors:
        a = {"tensor": name, "op": V.BROADCAST, "bytes": nbytes, "dtype": "float32", "shape": [nbytes // 4],
             "reduce_op": "Sum", "process_set": 0, "step": -1}
        sub, neg, start, end = t + 2.0 * rank, t + 40.0, t + 52.5, t + 90.0
        _lifecycle(ev, rank, name, a, sub, end, -1)
        fa = {"response": resp, "tensors": [name], "count": 1, "bytes": nbytes, "dtype": "float32",
              "op": V.BROADCAST, "reduce_op": "Sum", "backend": "ring", "threshold": 8 << 20, "process_set": 0,
              "step": -1, "root": 0, V.ARG_QUEUE_NS: round((start - neg) * 1000)}
        ev.append({"ph": "X", "name": V.FUSED_RESPONSE, "cat": V.CAT_FUSION, "pid": rank, "tid": 3, "ts": start,
                   "dur": end - start - 5.0, "args": fa})
        ev.append({"ph": "X", "name": V.MPI_BCAST, "cat": V.CAT_COMM, "pid": rank, "tid": 4, "ts": start + 1.0,
                   "dur": end - start - 10.0, "args": {"response": resp, "bytes": nbytes, "backend": "mpi"}})
        t, resp = end + 10.0, resp + 1
    return t, resp


def rank_events(rank, size, steps=3, tensors=(("grad.a", 4096), ("grad.b", 1 << 20)), late_rank=None,
                late_us=5000.0, threshold=8 << 20, skip=None, broadcasts=False,
                unknown_steps=False):
    """Events of one rank. ``skip=(rank, tensor, step)``: that rank never submits that tensor then, and
    the others wait for it forever. ``broadcasts``: the run starts with a step -1 broadcast of every
    tensor. ``unknown_steps``: every op and response says step -1 (mark_step never called)."""
    ev = []
    t = 100.0
    resp = 0
    if broadcasts:
        t, resp = _broadcasts(ev, rank, tensors, t, resp)
    for step_no in range(steps):
        step = -1 if unknown_steps else step_no
        step_start = t
        submits, op_args = {}, {}
        for name, nbytes in tensors:
            if skip and skip[0] == rank and skip[1] == name and skip[2] == step_no:
                continue
            delay = late_us if rank == late_rank else 0.0
            ts = t + delay + 10.0 * rank
            submits[name] = ts
            op_args[name] = {"tensor": name, "op": "ALLREDUCE", "bytes": nbytes, "dtype": "float32",
                             "shape": [nbytes // 4], "reduce_op": "Sum", "process_set": 0, "step": step}
        if skip and skip[2] == step_no:
            for name, ts in submits.items():
                _lifecycle(ev, rank, name, op_args[name], ts, None, step)
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
        comm = 200.0 + total / 1000.0
        end = start + comm + 40.0
        fa = {"response": resp, "tensors": names, "count": len(names), "bytes": total, "dtype": "float32",
              "op": "ALLREDUCE", "reduce_op": "Sum", "backend": "ring", "threshold": threshold,
              "process_set": 0, "step": step, V.ARG_QUEUE_NS: round((start - ready) * 1000)}
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
            _lifecycle(ev, rank, name, op_args[name], submits[name], end, step)
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
    return tensor_threads(ev, names=False)   # write_rank names the threads


def write_rank(path, rank, size, events, offset_ns=0, close=True, gz=False, shutdown=True,
               fmt=V.FORMAT_VERSION, meta=None):
    """Write one rank's trace file; ``offset_ns`` is its recorded clock offset (its wall minus rank 0's);
    ``meta``: more (or other) run metadata."""
    meta = {"format_version": fmt, "rank": rank, "size": size, "local_rank": rank, "host": "testhost",
            "pid": 1000 + rank, "backend": "ring", "fusion_threshold": 8 << 20, "cycle_time_ms": 1.0,
            "base_epoch_ns": BASE_EPOCH_NS + offset_ns, "clock_offset_ns": offset_ns,
            "clock_offset_uncertainty_ns": 2000, **(meta or {})}
    lines = ['{"otherData": {"ringscope": ' + json.dumps(meta) + '},', '"traceEvents": [']
    body = [json.dumps({"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}})]
    body += [json.dumps(e) for e in tensor_threads(events)]
    if shutdown:
        body.append(json.dumps({"ph": "i", "name": V.SHUTDOWN, "cat": V.CAT_META, "pid": rank, "tid": 1,
                                "ts": 1 + max((e["ts"] + e.get("dur", 0) for e in events if "ts" in e), default=0),
                                "s": "t",
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
