"""A Horovod-style PyTorch training script; only the import line differs from Horovod's, and the
two optional ``hvd.timeline`` lines that put data waits and forward passes in the timeline.

    ringscope run -np 4 examples/pytorch_synthetic_benchmark.py --epochs 2
    ringscope run -np 4 --timeline runs/example/ examples/pytorch_synthetic_benchmark.py

The five Horovod steps are marked (1)-(5) below; the data set is synthetic (random images of a fixed
rule), so nothing is downloaded.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data
import torch.utils.data.distributed

import collectives.torch as hvd  # was: import horovod.torch as hvd


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=5)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=5)
        self.fc1 = nn.Linear(256, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = F.relu(self.fc1(x.flatten(1)))
        return F.log_softmax(self.fc2(x), dim=1)


def synthetic_dataset(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(n, 1, 28, 28, generator=g)
    labels = (images.mean(dim=(1, 2, 3)) * 40).long().clamp(-5, 4) + 5
    return torch.utils.data.TensorDataset(images, labels)


def main():
    parser = argparse.ArgumentParser(description="Horovod-style synthetic PyTorch example")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.5)
    parser.add_argument("--fp16-allreduce", action="store_true")
    args = parser.parse_args()

    # (1) initialize
    hvd.init()
    torch.manual_seed(42)

    # (2) pin the device to the local rank
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(hvd.local_rank())
    device = torch.device("cuda" if use_cuda else "cpu")
    torch.set_num_threads(1)

    dataset = synthetic_dataset(args.samples)
    # each rank reads its own shard of the data
    sampler = torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=hvd.size(), rank=hvd.rank())
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    model = Net().to(device)
    # (3) scale the learning rate by the number of workers
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=args.momentum)

    # (4) wrap the optimizer: gradients are averaged across ranks during backward
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)

    # (5) start every rank from rank 0's weights and optimizer state
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    # (optional, ringscope only) the timeline shows each wait for a batch (DATA_WAIT) and each
    # forward pass (FORWARD); DistributedOptimizer adds BACKWARD and OPTIMIZER_STEP by itself
    loader = hvd.timeline.wrap_loader(loader)
    hvd.timeline.watch(model)

    for epoch in range(args.epochs):
        model.train()
        sampler.set_epoch(epoch)
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
        avg_loss = hvd.allreduce(loss.detach(), name="avg_loss")
        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss {avg_loss.item():.4f} ({hvd.size()} ranks)", flush=True)

    # every rank ends with the same weights
    checksum = sum(p.detach().double().sum() for p in model.parameters())
    checksums = hvd.allgather(checksum.reshape(1), name="checksum")
    if hvd.rank() == 0:
        same = bool(torch.all(checksums == checksums[0]))
        print(f"weights identical on all ranks: {same}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
