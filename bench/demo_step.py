"""The demo's training step for the measuring workers (after ``hvd.init()``).

The step of ``collectives/torch/demo_train.py`` (healthy scenario): the demo's model (``demo_model``,
``mixed``: ~130 gradients from a few hundred bytes to 4 MiB), SGD with momentum in
``DistributedOptimizer``, synthetic batches, and the per-step loss allreduce; one compute thread per
rank.
"""
from __future__ import annotations


def make_step(model_name: str = "mixed", batch: int = 32):
    """A callable running one training step on this rank (collectives.torch initialised)."""
    import torch
    import torch.nn.functional as F

    import collectives.torch as hvd
    from collectives.torch import demo_model
    torch.set_num_threads(1)
    model = demo_model.build(model_name, seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.0025 * hvd.size(), momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    gen = torch.Generator().manual_seed(1000 + hvd.rank())

    def step():
        x, y = demo_model.synthetic_batch(model, batch, gen)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        hvd.allreduce(loss.detach(), name="loss")

    return step
