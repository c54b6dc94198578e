"""Checks: DistributedOptimizer training equals one process training on the combined batch."""
import warnings

import torch
from torch import nn

import collectives.torch as hvd

BATCH = 8


def model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 3))


def batch(r, step, n=BATCH):
    g = torch.Generator().manual_seed(7919 * step + r)
    return torch.randn(n, 6, generator=g), torch.randn(n, 3, generator=g)


def flat(m):
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()])


def same_everywhere(m, what):
    """Parameters bit-identical on every rank (compared with rank 0's)."""
    mine = flat(m)
    ref = hvd.broadcast(mine, 0, name=f"cmp.{what}")
    return None if torch.equal(mine, ref) else f"{what}: rank {hvd.rank()} differs from rank 0 " \
        f"by {(mine - ref).abs().max().item():.3g}"


def reference(steps, lr, momentum, make_opt=None):
    """One process, every rank's batch concatenated (mean loss over the combined batch)."""
    m = model()
    opt = (make_opt or (lambda ps: torch.optim.SGD(ps, lr=lr, momentum=momentum)))(m.parameters())
    for s in range(steps):
        xs, ys = zip(*[batch(r, s) for r in range(hvd.size())])
        opt.zero_grad()
        nn.functional.mse_loss(m(torch.cat(xs)), torch.cat(ys)).backward()
        opt.step()
    return flat(m)


def train(steps=3, lr=0.1, momentum=0.9, passes=1, **kw):
    m = model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=lr, momentum=momentum),
                                   named_parameters=m.named_parameters(),
                                   backward_passes_per_step=passes, **kw)
    for s in range(steps):
        x, y = batch(hvd.rank(), s)
        opt.zero_grad()
        for xp, yp in zip(x.chunk(passes), y.chunk(passes)):
            (nn.functional.mse_loss(m(xp), yp) / passes).backward()
        opt.step()
    return m


def _compare(m, tol, what):
    bad = same_everywhere(m, what)
    if bad:
        return bad
    err = (flat(m) - reference(3, 0.1, 0.9)).abs().max().item()
    return None if err < tol else f"{what}: differs from the combined-batch reference by {err:.3g}"


def check_optimizer_matches_combined_batch():
    return _compare(train(), 1e-5, "plain")


def check_backward_passes_per_step_2():
    return _compare(train(passes=2), 1e-5, "passes=2")


def check_fp16_compression_training():
    return _compare(train(compression=hvd.Compression.fp16), 5e-3, "fp16")


def check_gradient_predivide_factor():
    return _compare(train(gradient_predivide_factor=2.0), 1e-5, "predivide=2")


def check_groups_match_combined_batch():
    bad = _compare(train(groups=2), 1e-5, "groups=2") or \
        _compare(train(num_groups=3), 1e-5, "num_groups=3")
    if bad:
        return bad
    m = model()
    ps = list(m.parameters())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=m.named_parameters(),
                                   groups=[ps[:3], ps[3:5]])        # the rest go one by one
    for s in range(3):
        x, y = batch(hvd.rank(), s)
        opt.zero_grad()
        nn.functional.mse_loss(m(x), y).backward()
        opt.step()
    err = (flat(m) - reference(3, 0.1, 0.9)).abs().max().item()
    return same_everywhere(m, "groups=lists") or (None if err < 1e-5 else f"lists: {err:.3g}")


def check_too_many_backward_passes_refused():
    m = model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters())
    x, y = batch(hvd.rank(), 0)
    nn.functional.mse_loss(m(x), y).backward()
    try:
        nn.functional.mse_loss(m(x), y).backward()
        refused = False
    except AssertionError as exc:
        refused = "backward_passes_per_step" in str(exc)
    opt.step()
    return None if refused else "a second backward() before step() was allowed"


def check_param_without_grad_no_deadlock():
    """Only some ranks use the second head on some steps: no deadlock, same params everywhere."""
    torch.manual_seed(1)
    body, head_a, head_b = nn.Linear(4, 4), nn.Linear(4, 1), nn.Linear(4, 1)
    params = [("body." + k, v) for k, v in body.named_parameters()] + \
        [("a." + k, v) for k, v in head_a.named_parameters()] + \
        [("b." + k, v) for k, v in head_b.named_parameters()]
    opt = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in params], lr=0.1),
                                   named_parameters=params)
    for s in range(3):
        x = torch.randn(5, 4, generator=torch.Generator().manual_seed(s * 10 + hvd.rank()))
        opt.zero_grad()
        h = body(x)
        out = head_a(h) + (head_b(h) if (hvd.rank() + s) % 2 == 0 else 0)
        out.sum().backward()
        opt.step()
    whole = nn.ModuleList([body, head_a, head_b])
    return same_everywhere(whole, "unused-param")


def check_duplicate_and_missing_names():
    m = model()
    named = list(m.named_parameters())
    try:
        hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                 named_parameters=named + [named[0]])
        return "duplicate names accepted"
    except ValueError:
        pass
    try:
        hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                 named_parameters=named[:2])
        return "missing names accepted"
    except ValueError:
        pass
    try:
        hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), op=hvd.Adasum)
        return "Adasum accepted"
    except NotImplementedError:
        return None


def _synchronized():
    """A model and its DistributedOptimizer after one backward pass and ``synchronize()``."""
    m = model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters())
    x, y = batch(hvd.rank(), 0)
    opt.zero_grad()
    nn.functional.mse_loss(m(x), y).backward()
    opt.synchronize()
    return m, opt


def check_synchronize_then_skip_synchronize():
    """Horovod's gradient-clipping recipe: synchronize(), clip, step() under skip_synchronize()."""
    m, opt = _synchronized()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with opt.skip_synchronize():
            opt.step()
    isinstance_ok = isinstance(opt, torch.optim.SGD)
    return same_everywhere(m, "clip") or (None if isinstance_ok else "not an SGD instance")


def check_zero_grad_before_step_is_refused():
    m = model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters())
    x, y = batch(hvd.rank(), 0)
    nn.functional.mse_loss(m(x), y).backward()
    try:
        opt.zero_grad()
        refused = False
    except AssertionError:
        refused = True
    opt.step()
    return None if refused else "zero_grad() between backward() and step() was allowed"


CHECKS = [check_optimizer_matches_combined_batch, check_backward_passes_per_step_2,
          check_fp16_compression_training, check_gradient_predivide_factor,
          check_param_without_grad_no_deadlock, check_duplicate_and_missing_names,
          check_synchronize_then_skip_synchronize, check_zero_grad_before_step_is_refused,
          check_groups_match_combined_batch, check_too_many_backward_passes_refused]


def check_sync_batch_norm_matches_combined_batch():
    """Outputs, input gradients, summed weight gradients and running stats equal BatchNorm2d on
    every rank's batch concatenated."""
    n, r = hvd.size(), hvd.rank()
    xs = [torch.randn(3, 4, 5, 5, generator=torch.Generator().manual_seed(50 + s)) * (s + 1)
          for s in range(n)]
    coef = [torch.randn(3, 4, 5, 5, generator=torch.Generator().manual_seed(90 + s))
            for s in range(n)]
    sbn = hvd.SyncBatchNorm(4)
    ref = nn.BatchNorm2d(4)
    with torch.no_grad():
        for bn in (sbn, ref):
            bn.weight.copy_(torch.linspace(0.5, 2.0, 4))
            bn.bias.copy_(torch.linspace(-1.0, 1.0, 4))
    x = xs[r].clone().requires_grad_(True)
    y = sbn(x)
    (y * coef[r]).sum().backward()
    xr = torch.cat(xs).requires_grad_(True)
    yr = ref(xr)
    (yr * torch.cat(coef)).sum().backward()
    sl = slice(3 * r, 3 * r + 3)
    bad = []
    if not torch.allclose(y, yr[sl], atol=1e-5):
        bad.append(f"output off by {(y - yr[sl]).abs().max().item():.3g}")
    if not torch.allclose(x.grad, xr.grad[sl], atol=1e-4):
        bad.append(f"input grad off by {(x.grad - xr.grad[sl]).abs().max().item():.3g}")
    gw = hvd.allreduce(sbn.weight.grad, op=hvd.Sum, name="sbn.gw")
    if not torch.allclose(gw, ref.weight.grad, atol=1e-3):
        bad.append("weight grad")
    if not (torch.allclose(sbn.running_mean, ref.running_mean, atol=1e-5) and
            torch.allclose(sbn.running_var, ref.running_var, atol=1e-4)):
        bad.append("running stats")
    sbn.eval()
    if not torch.allclose(sbn(xs[r]), ref.eval()(xs[r]), atol=1e-5):
        bad.append("eval mode")
    return "; ".join(bad) or None


CHECKS += [check_sync_batch_norm_matches_combined_batch]


def check_join_with_uneven_batches():
    """Rank r trains r + 1 steps, then joins; the others' allreduces see zeros from joined ranks."""
    n, r = hvd.size(), hvd.rank()
    m = model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters())
    sums = []
    for step in range(r + 1):
        x, y = batch(r, step)
        opt.zero_grad()
        nn.functional.mse_loss(m(x), y).backward()
        opt.step()
        sums.append(hvd.allreduce(torch.ones(1), op=hvd.Sum, name="join.count").item())
    last = hvd.join()
    want = [float(n - k) for k in range(r + 1)]
    if sums != want:
        return f"allreduce with joined ranks gave {sums}, want {want}"
    return None if last == n - 1 else f"join returned {last}, want {n - 1}"


CHECKS += [check_join_with_uneven_batches]


def check_outside_process_set_is_local_optimizer():
    """Horovod: on a rank outside ``process_set`` the DistributedOptimizer is a plain optimizer."""
    n, r = hvd.size(), hvd.rank()
    evens = hvd.add_process_set([s for s in range(n) if s % 2 == 0])
    m, local = model(), model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters(), process_set=evens)
    local_opt = torch.optim.SGD(local.parameters(), lr=0.1)
    x, y = batch(r, 0)
    for mm, o in ((m, opt), (local, local_opt)):
        o.zero_grad()
        nn.functional.mse_loss(mm(x), y).backward()
        o.step()
    bad = None
    if not evens.included() and not torch.equal(flat(m), flat(local)):
        bad = "outside the set: not the same as a local optimizer"
    if evens.included():
        ref = hvd.broadcast(flat(m), 0, name="outside.cmp", process_set=evens)
        if not torch.equal(ref, flat(m)):
            bad = "inside the set: parameters differ between its members"
        elif evens.size() > 1 and torch.equal(flat(m), flat(local)):
            bad = "inside the set: gradients were not averaged"
    hvd.barrier()
    hvd.remove_process_set(evens)
    return bad


def _embedding_training(sparse_as_dense, steps=2):
    n, r = hvd.size(), hvd.rank()
    torch.manual_seed(3)
    emb = nn.Embedding(10, 3, sparse=True)
    ref = nn.Embedding(10, 3, sparse=True)
    ref.load_state_dict(emb.state_dict())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=0.5),
                                   named_parameters=emb.named_parameters(),
                                   sparse_as_dense=sparse_as_dense)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    idx = [torch.tensor([(s + k) % 10 for k in range(3)] + [s % 10]) for s in range(n)]
    for step in range(steps):
        opt.zero_grad()
        emb(idx[r] + step).pow(2).sum().backward()
        opt.step()
        ref_opt.zero_grad()
        (sum(ref(i + step).pow(2).sum() for i in idx) / n).backward()   # the averaged loss
        ref_opt.step()
    if not emb.weight.grad.is_sparse:
        return f"sparse_as_dense={sparse_as_dense}: the gradient is no longer sparse"
    if not torch.allclose(emb.weight, ref.weight, atol=1e-6):
        return f"sparse_as_dense={sparse_as_dense}: max diff " \
               f"{(emb.weight - ref.weight).abs().max().item():.3g}"
    return None


def check_sparse_gradients():
    """Sparse embedding gradients: allgathered (or densified with sparse_as_dense), equal to one
    process training on the averaged loss."""
    return _embedding_training(False) or _embedding_training(True)


def check_step_after_synchronize_warns_as_horovod():
    m, opt = _synchronized()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
    texts = [str(w.message) for w in caught]
    want = ("optimizer.step() called without optimizer.skip_synchronize() context after "
            "optimizer.synchronize().")
    if len(texts) != 1 or not texts[0].startswith(want):
        return f"warnings {texts}"
    return same_everywhere(m, "warned")


CHECKS += [check_outside_process_set_is_local_optimizer, check_sparse_gradients,
           check_step_after_synchronize_warns_as_horovod]
