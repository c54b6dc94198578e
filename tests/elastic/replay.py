"""The reference for train_elastic.py: the same training replayed in one process, each world's
ranks simulated (their batches from the same ElasticSampler, gradients averaged as the
DistributedOptimizer does), restarting each world from the previous one's last commit."""
from __future__ import annotations

import copy

import torch

from collectives.torch.elastic import ElasticSampler

DEFAULTS = {"epochs": 2, "samples": 192, "batch": 4, "commit_every": 4, "lr": 0.01}


def replay(worlds: list[tuple[int, int | None]], **opts) -> dict:
    """``worlds``: [(size, steps_done at which it dies or None)]; returns the final weights, bias,
    steps_done and epoch of the last world."""
    o = dict(DEFAULTS, **opts)
    g = torch.Generator().manual_seed(0)
    X = torch.randn(o["samples"], 8, generator=g)
    y = X @ torch.linspace(-1, 1, 8).unsqueeze(1) + 0.01 * torch.randn(o["samples"], 1, generator=g)
    dataset = torch.utils.data.TensorDataset(X, y)
    torch.manual_seed(1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=o["lr"] * worlds[0][0], momentum=0.9)
    progress = {"epoch": 0, "steps_done": 0, "sampler": {"epoch": 0, "processed_num": 0}}

    def snapshot():
        return copy.deepcopy((model.state_dict(), opt.state_dict(), progress))

    committed = snapshot()
    for n, (size, dies_at) in enumerate(worlds):
        m, s, p = copy.deepcopy(committed)
        model.load_state_dict(m)
        opt.load_state_dict(s)
        progress = p
        if n:
            for group in opt.param_groups:   # the script's reset callback
                group["lr"] = o["lr"] * size
        samplers = [ElasticSampler(dataset, shuffle=True, seed=3, num_replicas=size, rank=r)
                    for r in range(size)]
        for smp in samplers:
            smp.load_state_dict(progress["sampler"])
        died = False
        while progress["epoch"] < o["epochs"] and not died:
            loaders = [torch.utils.data.DataLoader(dataset, batch_size=o["batch"], sampler=smp)
                       for smp in samplers]
            for i, batches in enumerate(zip(*loaders)):
                grads = []
                for xb, yb in batches:
                    model.zero_grad()
                    torch.nn.functional.mse_loss(model(xb), yb).backward()
                    grads.append([prm.grad.clone() for prm in model.parameters()])
                for k, prm in enumerate(model.parameters()):
                    prm.grad = torch.stack([gr[k] for gr in grads]).mean(0)
                opt.step()
                progress["steps_done"] += 1
                for smp in samplers:
                    smp.record_batch(i, o["batch"])
                progress["sampler"] = samplers[0].state_dict()
                if progress["steps_done"] == dies_at:
                    died = True
                    break
                if progress["steps_done"] % o["commit_every"] == 0:
                    committed = snapshot()
            if died:
                break
            progress["epoch"] += 1
            for smp in samplers:
                smp.set_epoch(progress["epoch"])
            progress["sampler"] = samplers[0].state_dict()
            committed = snapshot()
    return {"weight": model.weight.detach().flatten().tolist(), "bias": model.bias.item(),
            "steps_done": progress["steps_done"], "epoch": progress["epoch"]}
