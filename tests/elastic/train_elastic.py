"""An elastic torch training for the tests and the sample: linear regression on synthetic data
with DistributedOptimizer, ElasticSampler and TorchState, committing every few steps.

Rank 0 appends one JSON line per step (and per commit) to ``--log``. ``--kill-rank R
--kill-at-step S`` SIGKILLs rank R of generation 0 after its S-th step; ``--touch FILE
--touch-at-step S`` makes rank 0 create FILE after step S (a discovery script can
then report more slots).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

import torch

import collectives.torch as hvd
import tracer

p = argparse.ArgumentParser()
p.add_argument("--log", required=True)
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--samples", type=int, default=192)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--commit-every", type=int, default=4)
p.add_argument("--lr", type=float, default=0.01)
p.add_argument("--step-sleep", type=float, default=0.0)
p.add_argument("--kill-rank", type=int, default=-1)
p.add_argument("--kill-at-step", type=int, default=-1)
p.add_argument("--touch")
p.add_argument("--touch-at-step", type=int, default=-1)
args = p.parse_args()

hvd.init()
generation = int(os.environ.get("RINGSCOPE_ELASTIC_GENERATION", "0"))
g = torch.Generator().manual_seed(0)
X = torch.randn(args.samples, 8, generator=g)
y = X @ torch.linspace(-1, 1, 8).unsqueeze(1) + 0.01 * torch.randn(args.samples, 1, generator=g)
dataset = torch.utils.data.TensorDataset(X, y)

torch.manual_seed(1)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=3)
state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, steps_done=0)


def scale_lr() -> None:
    for group in optimizer.param_groups:
        group["lr"] = args.lr * hvd.size()


state.register_reset_callbacks([scale_lr])
log = open(args.log, "a") if hvd.rank() == 0 else None


def emit(**rec) -> None:
    if log is not None:
        log.write(json.dumps(dict(rec, gen=generation, size=hvd.size())) + "\n")
        log.flush()


@hvd.elastic.run
def train(state) -> None:
    while state.epoch < args.epochs:
        loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, sampler=state.sampler)
        for i, (xb, yb) in enumerate(loader):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            optimizer.step()
            state.steps_done += 1
            state.sampler.record_batch(i, args.batch)
            emit(step=state.steps_done, epoch=state.epoch, loss=loss.item(),
                 lr=optimizer.param_groups[0]["lr"], trace_step=tracer.get_recorder().step)
            if generation == 0 and hvd.rank() == args.kill_rank and state.steps_done == args.kill_at_step:
                os.kill(os.getpid(), signal.SIGKILL)
            if hvd.rank() == 0 and state.steps_done == args.touch_at_step:
                Path(args.touch).touch()
            if args.step_sleep:
                time.sleep(args.step_sleep)
            if state.steps_done % args.commit_every == 0:
                emit(commit=state.steps_done)
                state.commit()
        state.epoch += 1
        state.sampler.set_epoch(state.epoch)
        emit(commit=state.steps_done, epoch_end=state.epoch)
        state.commit()


train(state)
emit(final=True, steps_done=state.steps_done, epoch=state.epoch,
     weight=model.weight.detach().flatten().tolist(), bias=model.bias.item())
