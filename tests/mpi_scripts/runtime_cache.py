"""Worker: the response cache and its bit rounds against numpy references; one launch, many checks.

Run with the cache on and off (RINGSCOPE_CACHE_CAPACITY=0): each rank also reports digests of its
results so that the two launches can be compared bit for bit. Bursts that must reach the engine in
one batch are submitted holding the engine's lock (the engine cannot pick up half of them).
"""
import hashlib
import io
import os
import sys
import time
import traceback
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402
from collectives.engine import get_engine  # noqa: E402
from tests.mpi_scripts.runtime_ops import DTYPES, OPS, close, data, reference  # noqa: E402
from tests.mpi_util import write_results  # noqa: E402

results = {}


def check(name, fn):
    try:
        detail = fn()
        results[name] = {"ok": True, "detail": detail or ""}
    except Exception as exc:  # recorded, asserted by the pytest side
        results[name] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}\n"
                                                f"{traceback.format_exc()[-1500:]}"}


def main():
    from mpi4py import MPI
    size = MPI.COMM_WORLD.Get_size()
    ends = C.ProcessSet([0, size - 1])
    C.init(process_sets=[ends])
    r = C.rank()
    eng = get_engine()
    cache_on = eng.config.cache_capacity > 0
    stats = eng.stats

    def burst(fn):
        """Submit inside the engine's lock: the engine picks up the whole burst at once."""
        with eng.hold():
            return fn()

    def every_op_dtype_set():
        """Every reduce op x dtype on the global set and on a two-rank set, three steps (the first
        negotiated by rank 0, the others cached), plus the other op types each step."""
        digest = hashlib.sha256()
        before = stats["cached_responses"]
        for step in range(3):
            for ps, members in ((None, list(range(size))), (ends, ends.ranks)):
                if r not in members:
                    continue
                tag = "g" if ps is None else "e"
                jobs = []
                for opname, op in OPS.items():
                    for dt in DTYPES:
                        seed = zlib.crc32(f"{opname}{dt}{tag}".encode()) % 10_000
                        x = data(r, 37, dt, seed, op=opname)
                        h = C.allreduce_async(x, name=f"eq.{tag}.{opname}.{dt}", op=op,
                                              process_set=ps)
                        jobs.append((h, opname, dt, seed))
                for h, opname, dt, seed in jobs:
                    got = C.synchronize(h)
                    stack = np.stack([data(q, 37, dt, seed, op=opname) for q in members])
                    close(got, reference(stack, opname, dt, len(members)), dt,
                          f"step {step} set {tag} {opname} {dt}")
                    digest.update(got.tobytes())
                b = C.broadcast(np.arange(5.0) + r, 0, name=f"eq.{tag}.bcast", process_set=ps)
                g = C.allgather(np.full((r % 2 + 1, 2), r, np.int32), name=f"eq.{tag}.gather",
                                process_set=ps)
                a = C.alltoall(np.arange(len(members) * 2, dtype=np.float32) + r,
                               name=f"eq.{tag}.a2a", process_set=ps)
                rs = C.reducescatter(np.ones((len(members) * 2, 3)), op=C.Sum,
                                     name=f"eq.{tag}.rs", process_set=ps)
                for out in (b, g, a, rs):
                    digest.update(out.tobytes())
        used = stats["cached_responses"] - before
        if cache_on and used == 0:
            raise AssertionError("the cache was on but no response came from it")
        if not cache_on and used:
            raise AssertionError(f"the cache was off but {used} responses came from it")
        return {"digest": digest.hexdigest(), "cached_responses": used}
    check("every_op_dtype_set", every_op_dtype_set)

    def shape_change():
        """A cached tensor whose shape, dtype or priority changes is renegotiated (and re-cached)."""
        steps = [((10,), "float32", 0), ((10,), "float32", 0), ((12,), "float32", 0),
                 ((12,), "float32", 0), ((3, 4), "float32", 0), ((12,), "float64", 0),
                 ((12,), "float64", 2), ((12,), "float64", 2)]
        for i, (shape, dt, prio) in enumerate(steps):
            x = np.full(shape, r + 1, dt)
            got = C.allreduce(x, name="inv", op=C.Sum, priority=prio)
            close(got, np.full(shape, sum(range(1, size + 1)), dt), dt, f"step {i} {shape} {dt}")
        if cache_on:
            c = eng._rounds.caches[0].entries[eng._rounds.caches[0].bit_of["inv"]]
            assert c.shape == (12,) and c.dtype == "float64" and c.priority == 2, c
    check("shape_change_invalidates", shape_change)

    def mixed():
        """Cached and new tensors submitted in one burst (one engine cycle)."""
        xs = {f"mx.c{i}": np.full(4 + i, r + i, np.float64) for i in range(5)}
        for name, x in xs.items():   # negotiated once: cached from now on
            C.allreduce(x, name=name, op=C.Sum)
        for step in range(3):
            before = dict(stats)
            new = {f"mx.n{step}.{i}": np.full(3, r * i, np.float64) for i in range(4)}
            both = list(xs.items()) + list(new.items())
            hs = burst(lambda both=both: [(n, x, C.allreduce_async(x, name=n, op=C.Sum))
                                          for n, x in both])
            for n, x, h in hs:
                i = int(n[-1])
                total = i * sum(range(size)) if ".n" in n else sum(q + i for q in range(size))
                close(C.synchronize(h), np.full(x.shape, float(total)), "float64",
                      f"step {step} {n}")
            cached = stats["cached_responses"] - before["cached_responses"]
            full = stats["responses"] - before["responses"] - cached
            if cache_on and (cached == 0 or full == 0):
                raise AssertionError(f"step {step}: {cached} cached and {full} negotiated "
                                     "responses; expected both")
    check("mixed_cached_and_new", mixed)

    def join():
        """A rank joins while the others' tensors are cached: it stands in with zeros."""
        early = size - 1
        names = [f"jc.{i}" for i in range(3)]
        for _ in range(2):
            for i, n in enumerate(names):
                C.allreduce(np.full(5, float(r + i)), name=n, op=C.Sum)
        before = stats["cached_responses"]
        if r == early:
            last = C.join()
        else:
            for _ in range(2):
                hs = [C.allreduce_async(np.full(5, float(r + i)), name=n, op=C.Sum)
                      for i, n in enumerate(names)]
                for i, h in enumerate(hs):
                    close(C.synchronize(h), np.full(5, float(sum(q + i for q in range(size - 1)))),
                          "float64", f"{names[i]} with rank {early} joined")
            if cache_on and stats["cached_responses"] == before:
                raise AssertionError("no cached response while a rank had joined")
            last = C.join()
        assert last != early or size == 1, last
        for i, n in enumerate(names):   # everyone back: full sums again
            close(C.allreduce(np.full(5, float(r + i)), name=n, op=C.Sum),
                  np.full(5, float(sum(q + i for q in range(size)))), "float64", f"{n} after join")
    check("join_while_cached", join)

    def priorities():
        """Two steps (negotiated, then cached) of six low-priority tensors and one high one
        submitted last in one burst; the trace (read by the test) shows the order."""
        for step in range(2):
            C.mark_step(100 + step)
            hs = burst(lambda: [C.allreduce_async(np.full(64, float(r)), name=f"p.lo.{i}",
                                                  op=C.Sum) for i in range(6)]
                       + [C.allreduce_async(np.full(64, float(r)), name="p.hi", op=C.Sum,
                                            priority=3)])
            for h in hs:
                close(C.synchronize(h), np.full(64, float(sum(range(size)))), "float64", "prio")
    check("priorities", priorities)

    def stall_names_missing_rank():
        """A cached tensor one rank submits late: rank 0's stall report names that rank."""
        late = size - 1
        for _ in range(2):
            C.allreduce(np.ones(3), name="st", op=C.Sum)
        buf = io.StringIO()
        old = sys.stderr
        if r == 0:
            sys.stderr = buf
        try:
            if r == late:
                time.sleep(3.0)
            C.allreduce(np.ones(3), name="st", op=C.Sum)
        finally:
            sys.stderr = old
        if r == 0 and cache_on:
            text = buf.getvalue()
            if "stall" not in text or f"{late}: [st]" not in text:
                raise AssertionError(f"no stall report naming rank {late} for 'st': {text!r}")
    check("stall_names_missing_rank", stall_names_missing_rank)

    def late_tensor_costs_no_cycle():
        """A cached tensor one rank submits late, after the others' rounds went without it: the
        others post their next round at once, so it runs when it arrives, not a cycle later."""
        late, x = size - 1, np.ones(4)
        for _ in range(2):
            for n in ("lt", "lt.line", "lt.a", "lt.b"):
                C.allreduce(x, name=n, op=C.Sum)
        old = eng.config.cycle_time_ms
        eng.config.cycle_time_ms = 200.0   # (every rank, before the first round that uses it)
        waits = []
        try:
            for _ in range(3):
                C.allreduce(x, name="lt.line", op=C.Sum)
                if r == late:
                    time.sleep(0.45)   # two of the others' rounds go without it meanwhile
                t = time.perf_counter()
                close(C.allreduce(x, name="lt", op=C.Sum), np.full(4, float(size)), "float64", "late")
                waits.append(time.perf_counter() - t)
            # each rank holds a tensor the other lacks: they retry at once only every other round
            C.allreduce(x, name="lt.line", op=C.Sum)
            before = eng._rounds.rounds if cache_on else 0
            first, second = ("lt.a", "lt.b") if r == late else ("lt.b", "lt.a")
            h = C.allreduce_async(x, name=first, op=C.Sum)
            time.sleep(0.5)
            spent = eng._rounds.rounds - before if cache_on else 0
            C.synchronize(C.allreduce_async(x, name=second, op=C.Sum))
            C.synchronize(h)
        finally:
            eng.config.cycle_time_ms = old
        if r == late and cache_on and max(waits) > 0.1:   # (it took 150 ms before they did)
            raise AssertionError(f"the late tensor waited {[round(w * 1e3) for w in waits]} ms "
                                 "with a 200 ms cycle")
        if cache_on and spent > 8:   # 2 rounds a cycle at most: ~5 in 0.5 s
            raise AssertionError(f"{spent} rounds in 0.5 s with a 200 ms cycle")
        return {"waits_ms": [round(w * 1e3, 2) for w in waits], "rounds": spent}
    check("late_tensor_costs_no_cycle", late_tensor_costs_no_cycle)

    C.shutdown()
    write_results(results)


if __name__ == "__main__":
    main()
