"""Worker: every collective op against a numpy reference; one launch, many named checks.

Every rank builds every rank's input from a seed, so each can compute the reference locally.
"""
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402
from collectives.engine import get_engine  # noqa: E402
from tests.mpi_util import write_results  # noqa: E402

DTYPES = ["float16", "float32", "float64", "int32", "int64", "uint8"]
OPS = {"Sum": C.Sum, "Average": C.Average, "Min": C.Min, "Max": C.Max, "Product": C.Product}
results = {}


def check(name, fn):
    try:
        fn()
        results[name] = {"ok": True, "detail": ""}
    except Exception as exc:  # recorded, asserted by the pytest side
        results[name] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}\n"
                                                f"{traceback.format_exc()[-1500:]}"}


def data(r, n, dtype, seed, op="Sum", shape=None):
    rng = np.random.default_rng(seed * 1009 + r)
    shape = (n,) if shape is None else shape
    if op == "Product":
        vals = rng.integers(1, 3, size=shape)
    elif np.dtype(dtype).kind == "u":
        vals = rng.integers(0, 200, size=shape)
    elif np.dtype(dtype).kind == "i":
        vals = rng.integers(-1000, 1000, size=shape)
    else:
        vals = rng.standard_normal(shape) * 10
    return vals.astype(dtype)


def reference(stack, op, dtype, size):
    dt = np.dtype(dtype)
    if op in ("Sum", "Average"):
        s = stack.astype(np.float64).sum(0) if dt.kind == "f" else stack.sum(0, dtype=dt)
        if op == "Sum":
            return s
        if dt.kind == "f":
            return s / size
        return np.trunc(s.astype(np.float64) / size).astype(dt)
    if op == "Min":
        return stack.min(0)
    if op == "Max":
        return stack.max(0)
    return stack.astype(np.float64).prod(0) if dt.kind == "f" else stack.prod(0, dtype=dt)


def close(got, exp, dtype, what):
    dt = np.dtype(dtype)
    if got.dtype != dt:
        raise AssertionError(f"{what}: dtype {got.dtype} != {dt}")
    if got.shape != exp.shape:
        raise AssertionError(f"{what}: shape {got.shape} != {exp.shape}")
    if dt.kind == "f":
        tol = 2e-2 if dt == np.float16 else 1e-5
        ok = np.allclose(got.astype(np.float64), exp.astype(np.float64), rtol=tol, atol=tol * 10)
    else:
        ok = np.array_equal(got, exp)
    if not ok:
        bad = np.flatnonzero(~np.isclose(got.astype(np.float64), exp.astype(np.float64)))[:3]
        raise AssertionError(f"{what}: mismatch at {bad.tolist()}: got "
                             f"{got.reshape(-1)[bad].tolist()} expected "
                             f"{exp.reshape(-1)[bad].tolist()}")


def main(more=None):
    """Run every check; ``more(check)``, when given, runs further checks before shutdown."""
    from mpi4py import MPI  # MPI already initialised before ringscope: init must cope
    ends = C.ProcessSet([0, MPI.COMM_WORLD.Get_size() - 1])
    C.init(process_sets=[ends])
    r, size = C.rank(), C.size()
    lengths = sorted({1, 7, max(size - 1, 1), 5003})

    def every_op_dtype():
        # all submitted async at once: same-dtype/op tensors fuse, results must still be right
        cases, seed = [], 0
        for dtype in DTYPES:
            for opname, op in OPS.items():
                for n in lengths:
                    seed += 1
                    x = data(r, n, dtype, seed, opname)
                    h = C.allreduce_async(x, name=f"ar.{dtype}.{opname}.{n}", op=op)
                    cases.append((h, dtype, opname, n, seed))
        for h, dtype, opname, n, seed in cases:
            stack = np.stack([data(q, n, dtype, seed, opname) for q in range(size)])
            close(C.synchronize(h), reference(stack, opname, dtype, size), dtype,
                  f"allreduce {opname} {dtype} n={n}")
    check("allreduce_every_op_dtype", every_op_dtype)

    def unfused_one_by_one():
        for dtype in DTYPES:
            for opname, op in OPS.items():
                x = data(r, 7, dtype, 99, opname)
                stack = np.stack([data(q, 7, dtype, 99, opname) for q in range(size)])
                close(C.allreduce(x, op=op), reference(stack, opname, dtype, size), dtype,
                      f"sync allreduce {opname} {dtype}")
    check("allreduce_sync_every_op_dtype", unfused_one_by_one)

    def big_odd():
        n = 1_000_003
        for dtype, opname in (("float32", "Sum"), ("int64", "Max"), ("float64", "Average")):
            x = data(r, n, dtype, 7, opname)
            stack = np.stack([data(q, n, dtype, 7, opname) for q in range(size)])
            close(C.allreduce(x, name=f"big.{dtype}", op=OPS[opname]),
                  reference(stack, opname, dtype, size), dtype, f"n={n} {dtype} {opname}")
    check("allreduce_1000003", big_odd)

    def shapes_and_empty():
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) + r
        y = C.allreduce(x, op=C.Sum)
        close(y, (np.arange(24, dtype=np.float32).reshape(2, 3, 4) * size
                  + sum(range(size))), "float32", "3-d")
        z = C.allreduce(np.zeros(0, dtype=np.float64), op=C.Sum)
        assert z.shape == (0,), z.shape
        s = C.allreduce(np.array(float(r)), op=C.Sum)
        assert s.shape == () and float(s) == sum(range(size)), s
        inp = np.ones(5)
        C.allreduce(inp, op=C.Sum)
        assert (inp == 1).all(), "input was modified"
        out = C.allreduce_(inp, op=C.Sum)
        assert out is inp and (inp == size).all(), inp
        hs = [C.allreduce_async_(np.full(3, float(r)), name=f"inpl.{i}", op=C.Max) for i in range(3)]
        assert all((C.synchronize(h) == size - 1).all() for h in hs)
        strided = np.zeros((4, 2))[:, 0]
        strided += r
        C.allreduce_(strided, op=C.Sum)
        assert (strided == sum(range(size))).all(), strided
        b = np.full(4, float(r))
        assert C.broadcast_(b, size - 1) is b and (b == size - 1).all(), b
        big_endian = np.arange(5, dtype=">f8") + r
        close(C.allreduce(big_endian, op=C.Sum), np.arange(5.0) * size + sum(range(size)),
              "float64", "big-endian input")
        frozen = np.ones(3)
        frozen.flags.writeable = False
        close(C.allreduce(frozen, op=C.Sum), np.full(3, float(size)), "float64", "read-only")
    check("allreduce_shapes_scalar_empty", shapes_and_empty)

    def scaling():
        x = np.full(9, float(r + 1))
        y = C.allreduce(x, op=C.Sum, prescale_factor=2.0, postscale_factor=0.5)
        close(y, np.full(9, float(sum(range(1, size + 1)))), "float64", "pre/post scale")
        y = C.allreduce(x, op=C.Average, postscale_factor=3.0)
        close(y, np.full(9, 3.0 * sum(range(1, size + 1)) / size), "float64", "avg postscale")
    check("allreduce_scale_factors", scaling)

    def fused_async():
        # the last rank submits only after the barrier, which the others reach after polling:
        # their handles cannot be ready when they poll
        if r == size - 1:
            C.barrier()
        hs = [C.allreduce_async(np.full(100 + i, float(r * i), np.float32), name=f"fa.{i}",
                                op=C.Sum) for i in range(40)]
        polled = [C.poll(h) for h in hs]
        if r != size - 1:
            C.barrier()
            if any(polled):
                raise AssertionError(f"poll was true before the last rank submitted: {polled}")
        before = dict(get_engine().stats)
        for i, h in enumerate(hs):
            close(C.synchronize(h), np.full(100 + i, float(i * sum(range(size))), np.float32),
                  "float32", f"fa.{i}")
        assert all(C.poll(h) for h in hs)
        fused = get_engine().stats["max_fused"]
        assert fused > 1, f"no response fused more than one tensor: {before}"
    check("fused_async_poll", fused_async)

    def many_tensors_threshold():
        threshold = get_engine().config.fusion_threshold
        if r == 0:
            time.sleep(0.2)
        hs = [C.allreduce_async(np.full(1024, float(i), np.float32), name=f"many.{i}", op=C.Max)
              for i in range(300)]
        for i, h in enumerate(hs):
            close(C.synchronize(h), np.full(1024, float(i), np.float32), "float32", f"many.{i}")
        biggest = get_engine().stats["max_fused_bytes"]
        assert 0 < biggest <= threshold, f"fused {biggest} bytes with threshold {threshold}"
    check("many_tensors_threshold", many_tensors_threshold)

    def grouped():
        arrays = [np.full(i + 1, float(r + i)) for i in range(6)]
        before = get_engine().stats["responses"]
        out = C.grouped_allreduce(arrays, name="grp", op=C.Sum)
        after = get_engine().stats["responses"]
        for i, o in enumerate(out):
            close(o, np.full(i + 1, float(sum(range(size)) + size * i)), "float64", f"grp.{i}")
        assert after - before == 1, f"group ran as {after - before} responses"
        h = C.grouped_allreduce_async([np.ones(3, np.int32) * r, np.ones(2, np.int32)])
        got = C.synchronize(h)
        assert C.poll(h) and len(got) == 2
        close(got[0], np.full(3, sum(range(size)) // size, np.int32), "int32", "grouped async avg")
        close(got[1], np.ones(2, np.int32), "int32", "grouped async avg 2")
    check("grouped_allreduce", grouped)

    def allgather():
        for dtype in DTYPES:
            x = data(r, 3 * (r + 1), dtype, 5).reshape(r + 1, 3)
            exp = np.concatenate([data(q, 3 * (q + 1), dtype, 5).reshape(q + 1, 3)
                                  for q in range(size)])
            close(C.allgather(x, name=f"ag.{dtype}"), exp, dtype, f"allgather {dtype}")
        z = C.allgather(np.zeros((0 if r == 0 else 2, 2), np.float32))
        assert z.shape == (2 * (size - 1), 2), z.shape
    check("allgather_varying_first_dim", allgather)

    def broadcast():
        for root in range(size):
            for dtype in ("float16", "float64", "int32", "uint8"):
                x = data(r, 11, dtype, root)
                close(C.broadcast(x, root, name=f"bc.{root}.{dtype}"), data(root, 11, dtype, root),
                      dtype, f"broadcast root {root} {dtype}")
    check("broadcast_each_root", broadcast)

    def alltoall():
        splits = [(r + q) % 3 for q in range(size)]          # includes zeros
        rows = sum(splits)
        x = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2) + 1000 * r
        out, recv = C.alltoall(x, splits=splits, name="a2a", return_received_splits=True)
        parts = []
        for q in range(size):
            sq = [(q + d) % 3 for d in range(size)]
            xq = np.arange(sum(sq) * 2, dtype=np.float32).reshape(sum(sq), 2) + 1000 * q
            start = sum(sq[:r])
            parts.append(xq[start:start + sq[r]])
        close(out, np.concatenate(parts), "float32", "alltoall splits")
        assert list(recv) == [(q + r) % 3 for q in range(size)], recv
        even = C.alltoall(np.full((2 * size, 1), r, np.int64), name="a2a.even")
        close(even, np.repeat(np.arange(size), 2).reshape(-1, 1).astype(np.int64), "int64", "even")
    check("alltoall_splits", alltoall)

    def reducescatter():
        rows = 2 * size + 1
        for opname in ("Sum", "Average", "Max"):
            x = data(r, rows * 3, "float64", 3, opname).reshape(rows, 3)
            stack = np.stack([data(q, rows * 3, "float64", 3, opname).reshape(rows, 3)
                              for q in range(size)])
            full = reference(stack, opname, "float64", size)
            counts = [rows // size + (1 if i < rows % size else 0) for i in range(size)]
            start = sum(counts[:r])
            close(C.reducescatter(x, op=OPS[opname], name=f"rs.{opname}"),
                  full[start:start + counts[r]], "float64", f"reducescatter {opname}")
        y = C.reducescatter(np.full((size, 2), r + 1, np.int32), op=C.Sum)
        close(y, np.full((1, 2), sum(range(1, size + 1)), np.int32), "int32", "rs int")
        for dtype in ("float16", "uint8", "int64"):
            x = data(r, size * 4, dtype, 11).reshape(size, 4)
            stack = np.stack([data(q, size * 4, dtype, 11).reshape(size, 4) for q in range(size)])
            full = reference(stack, "Sum", dtype, size).astype(dtype)
            close(C.reducescatter(x, op=C.Sum, name=f"rs.{dtype}"), full[r:r + 1], dtype,
                  f"reducescatter Sum {dtype}")
    check("reducescatter", reducescatter)

    def switch_interval():
        # the engine thread needs the GIL often enough to progress under GIL-heavy user code
        assert sys.getswitchinterval() <= 0.0005 + 1e-9, sys.getswitchinterval()
    check("gil_switch_interval_lowered", switch_interval)

    def barrier_and_names():
        C.barrier()
        h1 = C.allreduce_async(np.ones(2))
        h2 = C.allreduce_async(np.ones(2))
        assert h1.name != h2.name and h1.name.startswith("allreduce.noname."), (h1.name, h2.name)
        C.synchronize(h1), C.synchronize(h2)
        C.barrier()
    check("barrier_and_unnamed", barrier_and_names)

    def duplicate_name():
        # rank 0 submits 'dup' before the barrier, the others after it: on rank 0 the first one is
        # certainly still in flight when the second is submitted
        if C.rank() == 0:
            h = C.allreduce_async(np.ones(4), name="dup")
            try:
                C.allreduce_async(np.ones(4), name="dup")
            except ValueError as exc:
                assert "dup" in str(exc)
            else:
                raise AssertionError("second in-flight 'dup' was accepted")
            C.barrier()
        else:
            C.barrier()
            h = C.allreduce_async(np.ones(4), name="dup")
        close(C.synchronize(h), np.ones(4), "float64", "dup first")
        close(C.allreduce(np.ones(4), name="dup"), np.ones(4), "float64", "dup reused after")
    check("duplicate_name_valueerror", duplicate_name)

    def process_sets():
        odd = C.add_process_set(range(1, size, 2))        # excludes the coordinator
        evens = C.add_process_set(C.ProcessSet(range(0, size, 2)))
        ids = [ends.process_set_id, odd.process_set_id, evens.process_set_id]
        assert None not in ids and (size != 4 or len(set(ids)) == 3), (ends, odd, evens)
        for ps in (ends, odd, evens):
            if r in ps.ranks:
                y = C.allreduce(np.full(5, float(r)), op=C.Sum, process_set=ps, name="ps.ar")
                close(y, np.full(5, float(sum(ps.ranks))), "float64", f"set {ps.ranks}")
                g = C.allgather(np.full((1,), r, np.int64), process_set=ps)
                close(g, np.array(ps.ranks, np.int64), "int64", "set allgather")
                b = C.broadcast(np.full(2, r, np.int32), 0, process_set=ps)
                close(b, np.full(2, ps.ranks[0], np.int32), "int32", "set broadcast root 0")
                assert ps.rank() == ps.ranks.index(r) and ps.included()
            else:
                try:
                    C.allreduce(np.ones(2), process_set=ps)
                except ValueError as exc:
                    assert "not a member" in str(exc), exc
                else:
                    raise AssertionError("non-member allreduce accepted")
        y = C.allreduce(np.ones(3), op=C.Sum, process_set=C.global_process_set)
        close(y, np.full(3, float(size)), "float64", "global set")
        C.remove_process_set(odd)
        assert odd.process_set_id is None
    check("process_sets", process_sets)

    def join():
        early = size - 1
        if r == early:
            last = C.join()
        else:
            s = C.allreduce(np.full(6, float(r + 1)), op=C.Sum, name="j.sum")
            close(s, np.full(6, float(sum(range(1, size)))), "float64", "sum with a joined rank")
            hs = [C.allreduce_async(np.full(3, r + 1, np.int64), op=C.Average, name=f"j.avg.{i}")
                  for i in range(3)]
            for h in hs:
                close(C.synchronize(h), np.full(3, sum(range(1, size)) // size, np.int64), "int64",
                      "average divides by the full size")
            try:
                C.allgather(np.ones((1, 2)), name="j.gather")
            except C.CollectiveError as exc:
                assert "joined" in str(exc), exc
            else:
                raise AssertionError("allgather ran while a rank had joined")
            last = C.join()
        lasts = C.allgather(np.array([last]), name="j.last")
        assert len(set(lasts.tolist())) == 1 and (size == 1 or lasts[0] != early), lasts
        y = C.allreduce(np.ones(2), op=C.Sum, name="j.after")
        close(y, np.full(2, float(size)), "float64", "allreduce after join")
    check("join", join)

    if more is not None:
        more(check)
    C.shutdown()
    write_results(results)


if __name__ == "__main__":
    main()
