"""An elastic numpy job for the tests: an ObjectState ``w`` moved each step by the average of the
ranks' ``rank + 1`` (so the world size at each step shows in the result), committed every few
steps; a process set of the even ranks, made again for each world by a reset callback, sums a
one over its ranks every step. Rank 0 appends one JSON line per step to ``--log``;
``--kill-rank``/``--kill-at-step`` and ``--touch``/``--touch-at-step`` as in train_elastic.py
(the kill only in generation 0).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

import numpy as np

import collectives as hvd

p = argparse.ArgumentParser()
p.add_argument("--log", required=True)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--commit-every", type=int, default=2)
p.add_argument("--step-sleep", type=float, default=0.0)
p.add_argument("--kill-rank", type=int, default=-1)
p.add_argument("--kill-at-step", type=int, default=-1)
p.add_argument("--raise-at-step", type=int, default=-1)   # rank 1 raises ValueError there
p.add_argument("--touch")
p.add_argument("--touch-at-step", type=int, default=-1)
args = p.parse_args()

hvd.init(process_sets="dynamic")   # as a Horovod elastic script asks for dynamic sets
generation = int(os.environ.get("RINGSCOPE_ELASTIC_GENERATION", "0"))
state = hvd.elastic.ObjectState(step=0, w=np.zeros(4))
resets = []
evens = hvd.add_process_set(list(range(0, hvd.size(), 2)))


def remake_process_sets() -> None:
    """Horovod's pattern: a reset callback makes the process sets again for the new world."""
    global evens
    hvd.remove_process_set(evens)
    evens = hvd.add_process_set(list(range(0, hvd.size(), 2)))
    resets.append(hvd.size())


state.register_reset_callbacks([remake_process_sets])
log = open(args.log, "a") if hvd.rank() == 0 else None


@hvd.elastic.run
def train(state) -> None:
    while state.step < args.steps:
        g = hvd.allreduce(np.full(4, hvd.rank() + 1.0), name="grad", op=hvd.Average)
        state.w = state.w + 0.1 * g
        state.step += 1
        hvd.mark_step()
        n_evens = (hvd.allreduce(np.ones(1), name="evens", op=hvd.Sum, process_set=evens)[0]
                   if hvd.rank() in evens.ranks else None)
        if log is not None:
            log.write(json.dumps({"gen": generation, "size": hvd.size(), "step": state.step,
                                  "w": float(state.w[0]), "resets": resets,
                                  "evens": evens.ranks, "n_evens": n_evens}) + "\n")
            log.flush()
        if generation == 0 and hvd.rank() == args.kill_rank and state.step == args.kill_at_step:
            os.kill(os.getpid(), signal.SIGKILL)
        if hvd.rank() == 1 and state.step == args.raise_at_step:
            raise ValueError(f"bad batch at step {state.step}")
        if hvd.rank() == 0 and state.step == args.touch_at_step:
            Path(args.touch).touch()
        if args.step_sleep:
            time.sleep(args.step_sleep)
        if state.step % args.commit_every == 0:
            state.commit()


train(state)
