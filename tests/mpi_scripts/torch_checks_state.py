"""Checks: broadcast_parameters / broadcast_optimizer_state restore rank 0's state everywhere."""
import torch
from torch import nn

import collectives.torch as hvd

OPTIMIZERS = {
    "SGD": lambda ps, lr: torch.optim.SGD(ps, lr=lr, momentum=0.9),
    "Adam": lambda ps, lr: torch.optim.Adam(ps, lr=lr, betas=(0.8, 0.95)),
    "AdamW": lambda ps, lr: torch.optim.AdamW(ps, lr=lr, weight_decay=0.05),
    "RMSprop": lambda ps, lr: torch.optim.RMSprop(ps, lr=lr, momentum=0.5, centered=True),
    "Adagrad": lambda ps, lr: torch.optim.Adagrad(ps, lr=lr, lr_decay=0.01),
}


def net(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 2))


def local_steps(m, opt, steps, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        opt.zero_grad()
        m(torch.randn(4, 5, generator=g)).pow(2).mean().backward()
        opt.step()


def state_tensors(opt):
    sd = opt.state_dict()
    out = []
    for idx in sorted(sd["state"]):
        for key in sorted(sd["state"][idx]):
            v = sd["state"][idx][key]
            out.append(torch.as_tensor(v, dtype=torch.float64).reshape(-1))
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


def _equal_to_root(t, what):
    size = torch.tensor([t.numel()])
    sizes = hvd.allgather(size, name=f"sz.{what}")
    if len(set(sizes.tolist())) != 1:
        return f"{what}: state sizes differ across ranks {sizes.tolist()}"
    root = hvd.broadcast(t, 0, name=f"st.{what}")
    return None if torch.equal(root, t) else f"{what}: rank {hvd.rank()} state differs from rank 0"


def _check(name, root_steps):
    r = hvd.rank()
    m = net(seed=r)                                   # different weights on every rank
    opt = OPTIMIZERS[name](m.parameters(), lr=0.01 if r else 0.123)
    local_steps(m, opt, root_steps if r == 0 else r % 2, seed=r)   # different (or no) state
    hvd.broadcast_parameters(m.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    bad = _equal_to_root(state_tensors(opt), name)
    if bad:
        return bad
    if opt.param_groups[0]["lr"] != 0.123:
        return f"{name}: lr {opt.param_groups[0]['lr']} was not restored to rank 0's 0.123"
    local_steps(m, opt, 2, seed=99)                  # same data everywhere from here on
    flat = torch.cat([p.detach().reshape(-1) for p in m.parameters()])
    return _equal_to_root(flat, name + ".after")


def check_broadcast_state_sgd():
    return _check("SGD", 2)


def check_broadcast_state_adam():
    return _check("Adam", 2)


def check_broadcast_state_adamw():
    return _check("AdamW", 3)


def check_broadcast_state_rmsprop():
    return _check("RMSprop", 2)


def check_broadcast_state_adagrad():
    return _check("Adagrad", 2)


def check_broadcast_state_root_has_none_yet():
    """Lazily created state: rank 0 has not stepped, the others have; as in Horovod, rank 0 creates
    its state with one step on zero gradients, and every rank gets it."""
    return _check("Adam", 0) or _created_state(OPTIMIZERS["AdamW"], distributed=False)


def _created_state(make, distributed):
    m = net(seed=0)
    before = torch.cat([p.detach().reshape(-1) for p in m.parameters()])
    opt = make(m.parameters(), 0.01)
    if distributed:
        opt = hvd.DistributedOptimizer(opt, named_parameters=m.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    if not torch.equal(before, torch.cat([p.detach().reshape(-1) for p in m.parameters()])):
        return "creating the state moved the parameters (weight decay on a zero gradient)"
    steps = [int(st["step"]) for st in opt.state_dict()["state"].values()]
    if steps != [1] * len(list(m.parameters())):
        return f"a fresh optimizer's state after broadcast: steps {steps}"
    if any(p.grad is None or p.grad.count_nonzero() for p in m.parameters()):
        return "a fresh optimizer's parameters lack zero gradients after broadcast"
    return None


def check_broadcast_state_fresh_distributed_optimizer():
    """A fresh DistributedOptimizer steps locally (no allreduce) to create its state."""
    return _created_state(OPTIMIZERS["AdamW"], distributed=True)


def check_broadcast_state_distributed_optimizer():
    r = hvd.rank()
    m = net(seed=r)
    opt = hvd.DistributedOptimizer(torch.optim.Adam(m.parameters(), lr=0.01),
                                   named_parameters=m.named_parameters())
    hvd.broadcast_parameters(m.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    g = torch.Generator().manual_seed(r)
    for _ in range(2):
        opt.zero_grad()
        m(torch.randn(4, 5, generator=g)).pow(2).mean().backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in m.parameters()])
    return _equal_to_root(flat, "dist.adam") or _equal_to_root(state_tensors(opt), "dist.state")


def check_broadcast_parameters_forms():
    r = hvd.rank()
    m = net(seed=r)
    hvd.broadcast_parameters(list(m.named_parameters()), root_rank=0)
    flat = torch.cat([p.detach().reshape(-1) for p in m.parameters()])
    want = torch.cat([p.detach().reshape(-1) for p in net(seed=0).parameters()])
    return None if torch.equal(flat, want) else "named_parameters form did not restore rank 0's"


CHECKS = [check_broadcast_state_sgd, check_broadcast_state_adam, check_broadcast_state_adamw,
          check_broadcast_state_rmsprop, check_broadcast_state_adagrad,
          check_broadcast_state_root_has_none_yet, check_broadcast_state_distributed_optimizer,
          check_broadcast_parameters_forms, check_broadcast_state_fresh_distributed_optimizer]
