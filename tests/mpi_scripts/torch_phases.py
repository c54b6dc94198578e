"""A plain Horovod-style loop (no hvd.timeline call): DistributedOptimizer alone must record
BACKWARD and OPTIMIZER_STEP. Four steps with backward_passes_per_step=1, then four with 2 (a
second model and optimizer). tests/torch/test_optimizer_phases.py reads the traces."""
import torch

import collectives.torch as hvd

STEPS = 4


def train(passes, seed):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    g = torch.Generator().manual_seed(seed + hvd.rank())
    for _ in range(STEPS):
        opt.zero_grad()
        for _ in range(passes):
            model(torch.randn(16, 32, generator=g)).square().mean().backward()
        opt.step()


torch.set_num_threads(1)
hvd.init()
train(1, 0)
train(2, 100)
hvd.shutdown()
