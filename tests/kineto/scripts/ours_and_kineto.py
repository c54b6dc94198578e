"""Our runtime (collectives.torch, 2 ranks under mpiexec) with its timeline on and torch.profiler
alongside (hvd.timeline.profile): both traces of each rank land in one run directory."""
import torch

import collectives.torch as hvd

hvd.init()
torch.manual_seed(hvd.rank())
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 16))
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                               named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
x, y = torch.randn(32, 128), torch.randn(32, 16)
with hvd.timeline.profile(wait=0, warmup=1, active=3) as prof:
    for _ in range(4):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        prof.step()
hvd.shutdown()
