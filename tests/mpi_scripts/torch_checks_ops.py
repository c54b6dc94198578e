"""Checks: every collectives.torch op against a local reference built from every rank's input."""
import torch

import collectives.torch as hvd

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8]
OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max,
       "Product": hvd.Product}


def data(r, shape=(3, 7), dtype=torch.float32, salt=0):
    g = torch.Generator().manual_seed(1000 * r + salt)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 4).round().to(dtype)
    return torch.randint(1, 4, shape, generator=g).to(dtype)


def reference(op, xs, dtype):
    w = torch.stack([x.to(torch.float64) for x in xs])
    if op == "Sum":
        out = w.sum(0)
    elif op == "Average":
        out = w.sum(0) / len(xs)
        if not dtype.is_floating_point:
            out = torch.trunc(out)
    elif op == "Min":
        out = w.min(0).values
    elif op == "Max":
        out = w.max(0).values
    else:
        out = w.prod(0)
    return out


def _close(got, want, dtype, what):
    tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 1e-6)
    got64 = got.to(torch.float64)
    if dtype == torch.uint8:   # wraps like the wire does
        want = torch.remainder(want, 256)
    if got.dtype != dtype or got.shape != want.shape:
        return f"{what}: got {got.dtype} {tuple(got.shape)}"
    if not torch.allclose(got64, want, rtol=tol, atol=tol):
        return f"{what}: max err {(got64 - want).abs().max().item()}"
    return None


def check_allreduce_ops_dtypes():
    n, bad = hvd.size(), []
    for dtype in DTYPES:
        for op_name, op in OPS.items():
            if op_name == "Product" and dtype == torch.uint8 and n > 2:
                continue
            mine = data(hvd.rank(), dtype=dtype, salt=len(bad))
            xs = [data(r, dtype=dtype, salt=len(bad)) for r in range(n)]
            got = hvd.allreduce(mine, op=op, name=f"ar.{dtype}.{op_name}")
            bad.append(_close(got, reference(op_name, xs, dtype), dtype, f"{dtype} {op_name}"))
            if not torch.equal(mine, data(hvd.rank(), dtype=dtype, salt=len(bad) - 1)):
                bad.append(f"{dtype} {op_name}: input modified")
    return "; ".join(b for b in bad if b) or None


def check_allreduce_odd_lengths_and_scale():
    n, bad = hvd.size(), []
    for length in (1, 7, n - 1 if n > 1 else 1, 100003):
        mine = torch.full((length,), float(hvd.rank() + 1))
        got = hvd.allreduce(mine, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
        want = torch.full((length,), 1.5 * n * (n + 1) / 2)
        if not torch.allclose(got, want):
            bad.append(f"length {length}: {got[:3]} vs {want[:3]}")
    return "; ".join(bad) or None


def check_allreduce_inplace_shares_memory():
    t = torch.full((1000,), float(hvd.rank()))
    ptr = t.data_ptr()
    out = hvd.allreduce_(t, op=hvd.Sum, name="inplace")
    want = float(sum(range(hvd.size())))
    if out is not t or t.data_ptr() != ptr:
        return "allreduce_ did not return the same tensor"
    if not torch.all(t == want):
        return f"allreduce_ value {t[:3]} != {want}"
    view = torch.zeros(4, 6)[:, ::2]         # non-contiguous: goes through a copy and back
    view.fill_(1.0)
    hvd.allreduce_(view, op=hvd.Sum, name="inplace.strided")
    return None if torch.all(view == hvd.size()) else f"strided in-place: {view}"


def check_async_poll_and_many_in_flight():
    n = hvd.size()
    ts = [torch.full((50000,), float(i + hvd.rank())) for i in range(20)]
    hs = [hvd.allreduce_async(t, name=f"async.{i}", op=hvd.Sum) for i, t in enumerate(ts)]
    polled = [hvd.poll(h) for h in hs]
    outs = [hvd.synchronize(h) for h in hs]
    bad = [i for i, o in enumerate(outs) if not torch.all(o == n * i + n * (n - 1) / 2)]
    if bad:
        return f"wrong results for {bad}"
    if not all(hvd.poll(h) for h in hs):
        return "poll false after synchronize"
    return None if isinstance(polled[0], bool) else "poll did not return a bool"


def check_duplicate_inflight_name_raises():
    # rank 0 submits 'dup' before the barrier, the others after it: on rank 0 the first 'dup' is
    # certainly still in flight when the second is submitted
    ok = True
    if hvd.rank() == 0:
        h = hvd.allreduce_async(torch.ones(3), name="dup")
        try:
            hvd.allreduce_async(torch.ones(3), name="dup")
            ok = False
        except ValueError:
            pass
        hvd.barrier()
    else:
        hvd.barrier()
        h = hvd.allreduce_async(torch.ones(3), name="dup")
    hvd.synchronize(h)
    return None if ok else "no ValueError for a second in-flight 'dup'"


def check_grouped_allreduce():
    n = hvd.size()
    ts = [torch.full((k + 1, 3), float(hvd.rank() + k)) for k in range(5)]
    outs = hvd.grouped_allreduce(ts, op=hvd.Sum, name="grp")
    bad = [k for k, o in enumerate(outs) if not torch.all(o == n * k + n * (n - 1) / 2)]
    inplace = [torch.full((4,), float(hvd.rank())) for _ in range(3)]
    h = hvd.grouped_allreduce_async_(inplace, name="grp.inplace")
    res = hvd.synchronize(h)
    if any(a is not b for a, b in zip(res, inplace)) or \
            any(not torch.all(t == (n - 1) / 2) for t in inplace):
        bad.append("in-place group")
    return f"grouped wrong: {bad}" if bad else None


def check_allgather_uneven():
    n, bad = hvd.size(), []
    for dtype in (torch.float32, torch.int64, torch.float16):
        mine = torch.full((hvd.rank() + 1, 2), hvd.rank(), dtype=dtype)
        got = hvd.allgather(mine, name=f"ag.{dtype}")
        want = torch.cat([torch.full((r + 1, 2), r, dtype=dtype) for r in range(n)])
        if got.dtype != dtype or not torch.equal(got, want):
            bad.append(str(dtype))
    return f"allgather wrong for {bad}" if bad else None


def check_broadcast_each_root():
    n, bad = hvd.size(), []
    for root in range(n):
        mine = data(hvd.rank(), shape=(5,), salt=root)
        got = hvd.broadcast(mine, root, name=f"bc.{root}")
        if not torch.equal(got, data(root, shape=(5,), salt=root)):
            bad.append(f"root {root}")
        t = data(hvd.rank(), shape=(2, 2), dtype=torch.int32, salt=root)
        hvd.broadcast_(t, root, name=f"bc_.{root}")
        if not torch.equal(t, data(root, shape=(2, 2), dtype=torch.int32, salt=root)):
            bad.append(f"in-place root {root}")
    return "; ".join(bad) or None


def check_alltoall():
    n, r = hvd.size(), hvd.rank()
    x = torch.arange(2 * n, dtype=torch.float32) + 100 * r
    got = hvd.alltoall(x, name="a2a.even")
    want = torch.cat([torch.arange(2 * r, 2 * r + 2, dtype=torch.float32) + 100 * s
                      for s in range(n)])
    if not torch.equal(got, want):
        return f"even alltoall {got} != {want}"
    splits = torch.tensor([(r + d) % 3 for d in range(n)], dtype=torch.int32)  # rows to rank d
    x = torch.full((int(splits.sum()), 2), float(r))
    got, received = hvd.alltoall(x, splits=splits, name="a2a.splits")
    want_rows = [(s + r) % 3 for s in range(n)]
    if received.tolist() != want_rows:
        return f"received splits {received.tolist()} != {want_rows}"
    want = torch.cat([torch.full((k, 2), float(s)) for s, k in enumerate(want_rows)])
    return None if torch.equal(got, want) else f"alltoall with splits {got} != {want}"


def check_reducescatter():
    n, r = hvd.size(), hvd.rank()
    rows = 2 * n + 1
    xs = [torch.arange(rows * 3, dtype=torch.float64).reshape(rows, 3) * (s + 1) for s in range(n)]
    got = hvd.reducescatter(xs[r], op=hvd.Sum, name="rs")
    full = sum(xs)
    counts = [rows // n + (1 if i < rows % n else 0) for i in range(n)]
    start = sum(counts[:r])
    if not torch.equal(got, full[start:start + counts[r]]):
        return f"reducescatter slice wrong: {got.shape} vs {counts[r]} rows"
    avg = hvd.reducescatter(xs[r], name="rs.avg")
    return None if torch.allclose(avg, full[start:start + counts[r]] / n) else "average wrong"


def check_autograd_allreduce():
    n, r = hvd.size(), hvd.rank()
    x = torch.ones(4, requires_grad=True)
    w = torch.arange(4, dtype=torch.float32) * (r + 1)
    (hvd.allreduce(x, name="ag.avg") * w).sum().backward()
    want = torch.arange(4, dtype=torch.float32) * sum(s + 1 for s in range(n)) / n
    if not torch.allclose(x.grad, want):
        return f"Average grad {x.grad} != {want}"
    y = torch.ones(3, requires_grad=True)
    hvd.allreduce(y, op=hvd.Sum, name="ag.sum").sum().backward()
    return None if torch.allclose(y.grad, torch.full((3,), float(n))) else f"Sum grad {y.grad}"


def check_autograd_allgather_broadcast():
    n, r = hvd.size(), hvd.rank()
    x = torch.zeros(r + 1, 2, requires_grad=True)
    y = hvd.allgather(x, name="grad.ag")
    coef = torch.arange(y.numel(), dtype=torch.float32).reshape(y.shape) * (r + 1)
    (y * coef).sum().backward()
    total = torch.arange(y.numel(), dtype=torch.float32).reshape(y.shape) * \
        sum(s + 1 for s in range(n))
    start = sum(s + 1 for s in range(r))
    if not torch.allclose(x.grad, total[start:start + r + 1] / n):   # Horovod averages
        return f"allgather grad {x.grad}"
    b = torch.ones(3, requires_grad=True)
    (hvd.broadcast(b, 0, name="grad.bc") * (r + 1)).sum().backward()
    want = torch.full((3,), sum(s + 1 for s in range(n)) / n) if r == 0 else torch.zeros(3)
    return None if torch.allclose(b.grad, want) else f"broadcast grad {b.grad}"


def check_fp16_compression():
    n = hvd.size()
    t = torch.full((100,), 1.0 / 3.0 + hvd.rank(), dtype=torch.float32)
    got = hvd.allreduce(t, name="fp16", compression=hvd.Compression.fp16, op=hvd.Sum)
    want = n / 3.0 + n * (n - 1) / 2
    if got.dtype != torch.float32:
        return f"fp16 compression returned {got.dtype}"
    return None if torch.allclose(got, torch.full((100,), want), rtol=2e-3) else f"{got[0]} vs {want}"


def check_adasum_not_supported():
    try:
        hvd.allreduce(torch.ones(2), op=hvd.Adasum)
    except NotImplementedError as exc:
        return None if "Adasum" in str(exc) else f"unclear message: {exc}"
    return "op=Adasum did not raise"


def check_objects_barrier_join():
    n, r = hvd.size(), hvd.rank()
    obj = hvd.broadcast_object({"rank": r, "list": list(range(r + 3))} if r == 0 else None, 0)
    if obj != {"rank": 0, "list": [0, 1, 2]}:
        return f"broadcast_object {obj}"
    got = hvd.allgather_object({"r": r, "s": "x" * r})
    if got != [{"r": s, "s": "x" * s} for s in range(n)]:
        return f"allgather_object {got}"
    hvd.barrier()
    last = hvd.join()
    return None if 0 <= last < n else f"join returned {last}"


def check_rank_queries():
    n = hvd.size()
    ok = hvd.is_initialized() and 0 <= hvd.rank() < n and hvd.local_size() >= 1 and \
        0 <= hvd.local_rank() < hvd.local_size() and hvd.cross_size() >= 1
    return None if ok else "rank queries inconsistent"


CHECKS = [check_rank_queries, check_allreduce_ops_dtypes, check_allreduce_odd_lengths_and_scale,
          check_allreduce_inplace_shares_memory, check_async_poll_and_many_in_flight,
          check_duplicate_inflight_name_raises, check_grouped_allreduce, check_allgather_uneven,
          check_broadcast_each_root, check_alltoall, check_reducescatter, check_autograd_allreduce,
          check_autograd_allgather_broadcast, check_fp16_compression, check_adasum_not_supported,
          check_objects_barrier_join]


def check_process_sets():
    n, r = hvd.size(), hvd.rank()
    static = [ps for ps in (hvd.ProcessSet([0, 1]),)][0]
    pair = hvd.add_process_set(static)        # already registered at init: same set back
    if pair.process_set_id is None or (pair.process_set_id == 0 and n > 2):
        return f"static set not registered: {pair!r}"
    if r in (0, 1):
        got = hvd.allreduce(torch.tensor([float(r + 1)]), op=hvd.Sum, name="ps.pair",
                            process_set=pair)
        if got.item() != 3.0:
            return f"allreduce on set [0, 1] gave {got.item()}"
        if pair.rank() != r or pair.size() != 2:
            return f"set rank/size {pair.rank()}/{pair.size()}"
    evens = hvd.add_process_set([s for s in range(n) if s % 2 == 0])
    if r % 2 == 0:
        got = hvd.allreduce(torch.tensor([1.0]), op=hvd.Sum, name="ps.evens", process_set=evens)
        if got.item() != len(range(0, n, 2)):
            return f"allreduce on the even ranks gave {got.item()}"
        obj = hvd.broadcast_object("from set rank 0" if evens.rank() == 0 else None, 0,
                                   process_set=evens)
        if obj != "from set rank 0":
            return f"broadcast_object on a set gave {obj!r}"
    hvd.barrier()
    if hvd.remove_process_set(evens) is not True:
        return "remove_process_set did not return True"
    return None


def check_start_stop_timeline():
    import json
    import os
    path = os.path.join(os.environ["RESULTS_DIR"], "timeline", "t.json")
    hvd.start_timeline(path)
    hvd.allreduce(torch.ones(10), name="in.timeline")
    hvd.stop_timeline()
    from collectives import engine_trace
    if not engine_trace.stamped():
        return "completions stopped looking for stamps before the op after stop_timeline"
    hvd.allreduce(torch.ones(10), name="after.timeline")
    if engine_trace.stamped():   # the closed timeline writes no ends: nothing left to look for
        return "completions still look for stamped ops after stop_timeline"
    mine = [f for f in os.listdir(os.path.dirname(path)) if f.endswith(f"{r_:05d}.json")] \
        if (r_ := hvd.rank()) is not None else []
    if not mine:
        return f"no timeline file for rank {r_} in {os.listdir(os.path.dirname(path))}"
    text = open(os.path.join(os.path.dirname(path), mine[0])).read()
    events = json.loads(text)["traceEvents"]
    names = {e.get("name") for e in events}
    if "allreduce.in.timeline" not in names:
        return "the op inside start/stop_timeline is not in the file"
    return "the op after stop_timeline was recorded" if "allreduce.after.timeline" in names \
        else None


CHECKS += [check_process_sets, check_start_stop_timeline]


def check_shape_mismatch_raises_on_every_rank():
    t = torch.ones(3 + hvd.rank())
    try:
        hvd.allreduce(t, name="mismatch")
    except Exception as exc:         # collectives.CollectiveError
        msg = str(exc)
        return None if "mismatch" in msg else f"error does not name the tensor: {msg}"
    return "no error for shapes that differ across ranks"


CHECKS += [check_shape_mismatch_raises_on_every_rank]


# ---- Horovod drop-in: names and semantics its own test suite relies on ----------------------

def check_horovod_build_queries():
    import os
    gloo = os.environ.get("RINGSCOPE_BACKEND") == "gloo"
    got = (hvd.ccl_built(), hvd.ddl_built(), hvd.rocm_built(), hvd.gloo_enabled(),
           hvd.mpi_threads_supported())
    want = (False, False, False, gloo, True)
    if got != want:
        return f"ccl/ddl/rocm built, gloo enabled, mpi threads: {got} != {want}"
    try:
        hvd.allreduce(torch.ones(2 + hvd.rank()), name="internal.error")
    except hvd.HorovodInternalError as exc:
        return None if isinstance(exc, RuntimeError) else "HorovodInternalError not a RuntimeError"
    return "a shape mismatch did not raise HorovodInternalError"


def check_grouped_allgather():
    n, r = hvd.size(), hvd.rank()
    dtypes = [torch.float32, torch.int64, torch.float16]
    mine = [torch.full((r + 1 + i, 2), r * 10 + i, dtype=d) for i, d in enumerate(dtypes)]
    want = [torch.cat([torch.full((s + 1 + i, 2), s * 10 + i, dtype=d) for s in range(n)])
            for i, d in enumerate(dtypes)]
    for how, got in (("sync", hvd.grouped_allgather(mine, name="gag")),
                     ("async", hvd.synchronize(hvd.grouped_allgather_async(mine)))):
        if len(got) != 3 or not all(torch.equal(g, w) for g, w in zip(got, want)):
            return f"{how}: {[tuple(g.shape) for g in got]}"
    xs = [torch.ones(r + 1, 2, requires_grad=True), torch.ones(3, requires_grad=True)]
    ys = hvd.grouped_allgather(xs, name="gag.grad")
    sum((y * (r + 1) * torch.arange(y.shape[0]).reshape(-1, *[1] * (y.dim() - 1))).sum()
        for y in ys).backward()
    mean_c = sum(s + 1 for s in range(n)) / n       # Horovod averages the gradient
    start = [sum(s + 1 for s in range(r)), 3 * r]
    for x, st in zip(xs, start):
        rows = torch.arange(st, st + x.shape[0], dtype=torch.float32)
        want_g = (rows * mean_c).reshape(-1, *[1] * (x.dim() - 1)).expand_as(x)
        if not torch.allclose(x.grad, want_g):
            return f"grouped_allgather grad {x.grad} != {want_g}"
    return None


def _rows(total, n):
    counts = [total // n + (1 if i < total % n else 0) for i in range(n)]
    return counts, [sum(counts[:i]) for i in range(n)]


def check_grouped_reducescatter():
    n, r = hvd.size(), hvd.rank()
    shapes = [(2 * n + 1, 3), (n,)]
    xs = [[torch.arange(torch.Size(sh).numel(), dtype=torch.float64).reshape(sh) * (s + 1)
           for sh in shapes] for s in range(n)]
    for op, div in ((hvd.Sum, 1), (hvd.Average, n)):
        for how in ("sync", "async"):
            got = hvd.grouped_reducescatter(xs[r], op=op) if how == "sync" else \
                hvd.synchronize(hvd.grouped_reducescatter_async(xs[r], op=op))
            for i, g in enumerate(got):
                counts, starts = _rows(shapes[i][0], n)
                full = sum(x[i] for x in xs) / div
                if not torch.allclose(g, full[starts[r]:starts[r] + counts[r]]):
                    return f"{op} {how} tensor {i}: {g} vs {full}"
    return None


def check_reducescatter_gradient():
    """Horovod's backward: allgather of the gradient, times the set size for Sum, unscaled for
    Average, times the pre/post scale factors."""
    n, r = hvd.size(), hvd.rank()
    rows = 2 * n
    counts, _ = _rows(rows, n)
    for op, k in ((hvd.Sum, n), (hvd.Average, 1)):
        for grouped in (False, True):
            x = torch.zeros(rows, 2, requires_grad=True)
            kw = {"op": op, "prescale_factor": 0.5, "postscale_factor": 3.0}
            y = hvd.grouped_reducescatter([x], **kw)[0] if grouped else hvd.reducescatter(x, **kw)
            (y * (r + 1)).sum().backward()
            want = torch.cat([torch.full((counts[s], 2), (s + 1) * k * 1.5) for s in range(n)])
            if not torch.allclose(x.grad, want):
                return f"{op} grouped={grouped}: grad {x.grad[:, 0].tolist()} != " \
                       f"{want[:, 0].tolist()}"
    return None


def check_fp16_scale_in_fp32():
    """Horovod scales float16 on the CPU in float32: (x.float() * float32(f)).half(), exactly."""
    import numpy as np
    n, bad = hvd.size(), []
    for dim in (1, 2, 3):
        torch.manual_seed(1234)
        np.random.seed(1234)
        f = np.random.uniform()
        x = torch.FloatTensor(*([17] * dim)).random_(-100, 100).half()
        f32 = torch.tensor(f, dtype=torch.float64).float()
        pre = hvd.allreduce(x, op=hvd.Sum, prescale_factor=f)
        want_pre = (x.float() * f32).half().float() * n
        post = hvd.allreduce(x, op=hvd.Sum, postscale_factor=f)
        want_post = ((x.float() * n) * f32).half().float()
        if not torch.equal(pre.float(), want_pre):
            bad.append(f"prescale dim {dim}: {(pre.float() - want_pre).abs().max()}")
        if not torch.equal(post.float(), want_post):
            bad.append(f"postscale dim {dim}: {(post.float() - want_post).abs().max()}")
    return "; ".join(bad) or None


def check_root_rank_is_global_in_process_set():
    n, r = hvd.size(), hvd.rank()
    odds = hvd.add_process_set([s for s in range(n) if s % 2])
    root = max(odds.ranks)          # a global rank: n - 1 (its position in the set is not)
    bad = None
    if odds.included():
        got = hvd.broadcast(torch.tensor([float(r)]), root, name="ps.root", process_set=odds)
        if got.item() != root:
            bad = f"broadcast from global rank {root} in {odds.ranks} gave {got.item()}"
        obj = hvd.broadcast_object(f"from {r}", root, process_set=odds)
        if obj != f"from {root}":
            bad = f"broadcast_object from global rank {root} gave {obj!r}"
        x = torch.ones(2, requires_grad=True)
        hvd.broadcast(x, root, name="ps.root.grad", process_set=odds).sum().backward()
        if x.grad.tolist() != ([1.0, 1.0] if r == root else [0.0, 0.0]):
            bad = f"broadcast grad in a set {x.grad.tolist()}"
        try:
            hvd.broadcast(torch.ones(1), 0, process_set=odds)
            bad = "root_rank 0, outside the set, was accepted"
        except ValueError as exc:
            if "not a member" not in str(exc):
                bad = f"unclear error: {exc}"
    hvd.barrier()
    hvd.remove_process_set(odds)
    return bad


def check_sparse_allreduce_async():
    n, r = hvd.size(), hvd.rank()

    def sparse(s):
        idx = torch.tensor([[s % 4, (s + 1) % 4], [0, 2]])
        return torch.sparse_coo_tensor(idx, torch.tensor([s + 1.0, 2.0 * s]), (4, 3),
                                       check_invariants=True)
    total = sum(sparse(s).to_dense() for s in range(n))
    for op, div in ((hvd.Sum, 1), (hvd.Average, n)):
        h = hvd.sparse_allreduce_async(sparse(r), name=f"sp.{op}", op=op)
        got = h()                   # Horovod's handle is a callable
        if not got.is_sparse or not torch.allclose(got.to_dense(), total / div):
            return f"{op}: {got}"
    return None


CHECKS += [check_horovod_build_queries, check_grouped_allgather, check_grouped_reducescatter,
           check_reducescatter_gradient, check_fp16_scale_in_fp32,
           check_root_rank_is_global_in_process_set, check_sparse_allreduce_async]
