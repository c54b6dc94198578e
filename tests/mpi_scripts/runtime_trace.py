"""Worker: the runtime emits the events of the tracer contract (docs/ARCHITECTURE.md).

A recorder that keeps every call in memory is installed through ``tracer.set_recorder`` (the
contract's own hook) after init; each rank reports its events' summary for cross-rank checks.
"""
import os
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402
import tracer  # noqa: E402
from tests.mpi_util import write_results  # noqa: E402
from tracer import vocab as V  # noqa: E402
from tracer.recorder import NullRecorder  # noqa: E402


class ListRecorder(NullRecorder):
    """Keeps every contract call (tracer/recorder.py): (ph, tid, name, cat, args, t0, t1)."""

    enabled = True
    mark_cycles = True

    def __init__(self):
        self.events = []

    def begin(self, tid, name, cat, args=None, ts_ns=None):
        return (tid, name, cat, dict(args or {}), self.now() if ts_ns is None else ts_ns)

    def end(self, token, args=None):
        tid, name, cat, a, t0 = token
        self.events.append(("X", tid, name, cat, {**a, **(args or {})}, t0, self.now()))

    def span(self, tid, name, cat, args=None):
        rec = self

        class _Span:
            def __enter__(self):
                self.tok = rec.begin(tid, name, cat, args)

            def __exit__(self, *exc):
                rec.end(self.tok)
        return _Span()

    def complete(self, tid, name, cat, t0_ns, t1_ns, args=None):
        self.events.append(("X", tid, name, cat, dict(args or {}), t0_ns, t1_ns))

    def instant(self, tid, name, cat, args=None, ts_ns=None):
        self.events.append(("i", tid, name, cat, dict(args or {}), ts_ns or self.now(), None))

    def ready(self, names, rank, process_set, ts_ns=None):
        self.instant(V.TID_NEGOTIATION, V.READY, V.CAT_NEGOTIATION,
                     {V.ARG_TENSORS: list(names), V.ARG_RANK: rank,
                      V.ARG_PROCESS_SET: process_set}, ts_ns)

    def ops_done(self, ops, t_done_ns, error=None):
        mine = [op for op in ops if op.stamp is not None and op.stamp[0] is self]
        for op in mine:
            keys = (V.ARG_OP, V.ARG_BYTES, V.ARG_DTYPE, V.ARG_SHAPE, V.ARG_REDUCE_OP,
                    V.ARG_PROCESS_SET, V.ARG_PRIORITY)
            args = dict(zip(keys, op.trace_key[1:]), step=op.stamp[1])
            if error:
                args[V.ARG_ERROR] = error
            self.events.append(("op", None, op.trace_key[0], V.CAT_TENSOR, args, op.submit_ns,
                                t_done_ns))
        return [op for op in ops if op.stamp is not None and op.stamp[0] is not self] or None

    def counter(self, name, value, ts_ns=None):
        self.events.append(("C", None, name, V.CAT_COUNTER, {"value": value}, ts_ns or self.now(),
                            None))


def main():
    C.init()
    r, size = C.rank(), C.size()
    rec = ListRecorder()
    tracer.set_recorder(rec)
    C.barrier()   # every rank records before any rank submits the checked ops
    res = {}
    try:
        C.mark_step(3)
        hs = [C.allreduce_async(np.full(64, float(r)), name=f"t.small.{i}") for i in range(5)]
        [C.synchronize(h) for h in hs]
        C.allreduce(np.ones(200_000, np.float32), name="t.big")      # ring path, not direct
        C.allgather(np.ones((r + 1, 2)), name="t.gather")
        ev = rec.events
        def names(kind, tid=None):
            return [e for e in ev if e[0] == kind and (tid is None or e[1] == tid)]
        fused = [e for e in names("X", V.TID_FUSION) if e[2] == V.FUSED_RESPONSE]
        resp_of = {}
        for e in fused:
            for t in e[4][V.ARG_TENSORS]:
                resp_of[t] = e[4][V.ARG_RESPONSE]
        res["response_ids"] = resp_of
        tensors = ["t.small.0", "t.small.4", "t.big", "t.gather"]
        problems = []
        for t in tensors:
            life = [e for e in ev if e[0] == "op" and e[2] == t]
            op = "ALLGATHER" if t == "t.gather" else "ALLREDUCE"
            if len(life) != 1 or life[0][4].get(V.ARG_STEP) != 3 or life[0][4][V.ARG_OP] != op \
                    or not life[0][5] <= life[0][6]:
                problems.append(f"{t}: lifecycle {life}")
        outer = [e for e in ev if e[0] == "op" and e[2] == "t.big"][0][4]
        for k in (V.ARG_OP, V.ARG_BYTES, V.ARG_DTYPE, V.ARG_SHAPE, V.ARG_REDUCE_OP,
                  V.ARG_PROCESS_SET, V.ARG_PRIORITY, V.ARG_STEP):
            if k not in outer:
                problems.append(f"outer slice lacks {k}")
        if outer.get(V.ARG_BYTES) != 800_000 or list(outer.get(V.ARG_SHAPE, ())) != [200_000]:
            problems.append(f"outer args {outer}")
        big = [e for e in fused if list(e[4][V.ARG_TENSORS]) == ["t.big"]]
        if len(big) != 1 or big[0][4][V.ARG_BACKEND] != "ring":
            problems.append(f"FUSED_RESPONSE for t.big: {big}")
        for k in (V.ARG_RESPONSE, V.ARG_TENSORS, V.ARG_COUNT, V.ARG_BYTES, V.ARG_DTYPE, V.ARG_OP,
                  V.ARG_REDUCE_OP, V.ARG_BACKEND, V.ARG_THRESHOLD, V.ARG_PROCESS_SET, V.ARG_STEP,
                  V.ARG_QUEUE_NS, V.ARG_PRIORITY):
            if fused and k not in fused[0][4]:
                problems.append(f"FUSED_RESPONSE lacks {k}")
        backend = [e for e in names("X", V.TID_BACKEND)]
        ring = [e for e in backend if e[2] == V.RING_ALLREDUCE and e[4][V.ARG_BYTES] == 800_000]
        phases = [e[2] for e in backend if e[2] in V.RING_SUBPHASES]
        if len(ring) != 1 or phases.count(V.RING_REDUCE_SCATTER) < 1 or \
                phases.count(V.RING_ALLGATHER) < 1:
            problems.append(f"ring spans {[(e[2], e[4]) for e in backend]}")
        elif not (ring[0][5] <= min(e[5] for e in backend if e[2] in V.RING_SUBPHASES)):
            problems.append("ring subphases not nested")
        if not any(e[2] == V.MPI_ALLGATHER for e in backend):
            problems.append("no MPI_ALLGATHER span")
        res["max_fused"] = max((e[4][V.ARG_COUNT] for e in fused), default=0)
        multi = [e for e in fused if e[4][V.ARG_COUNT] > 1]
        memcpy = {e[2] for e in names("X", V.TID_FUSION)} & {V.MEMCPY_IN_FUSION_BUFFER,
                                                             V.MEMCPY_OUT_FUSION_BUFFER}
        if multi and len(memcpy) != 2:
            problems.append(f"fused response without MEMCPY spans: {memcpy}")
        counters = {e[2] for e in names("C")}
        if not {V.COUNTER_QUEUE_DEPTH, V.COUNTER_BYTES_IN_FLIGHT} <= counters:
            problems.append(f"counters {counters}")
        if not any(e[2] == V.CYCLE for e in names("X", V.TID_CYCLES)):
            problems.append("no CYCLE spans with mark_cycles on")
        if not any(e[2] == V.SYNCHRONIZE for e in names("X", V.TID_FRAMEWORK)):
            problems.append("no SYNCHRONIZE span")
        ready = [(t, e[4][V.ARG_RANK]) for e in names("i", V.TID_NEGOTIATION)
                 if e[2] == V.READY for t in e[4][V.ARG_TENSORS]]
        if r == 0:
            want = {(t, q) for t in tensors for q in range(size)}
            if not want <= set(ready):
                problems.append(f"READY missing {sorted(want - set(ready))[:5]}")
        elif ready:
            problems.append("READY emitted on a non-coordinator rank")
        res["problems"] = problems
        tracer.set_recorder(NullRecorder())
        res["clock"] = C.runtime.clock_offsets()
    except Exception:
        res["problems"] = [traceback.format_exc()]
    C.shutdown()
    res["clock"] = C.runtime.clock_offsets()
    write_results({"trace": {"ok": not res["problems"], "detail": res}})


if __name__ == "__main__":
    main()
