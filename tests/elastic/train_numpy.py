"""An elastic numpy job for the tests: an ObjectState ``w`` moved each step by the average of the
ranks' ``rank + 1`` (so the world size at each step shows in the result), committed every few
steps. Rank 0 appends one JSON line per step to ``--log``; ``--kill-rank``/``--kill-at-step`` and
``--touch``/``--touch-at-step`` as in train_elastic.py (the kill only in generation 0).
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
p.add_argument("--touch")
p.add_argument("--touch-at-step", type=int, default=-1)
args = p.parse_args()

hvd.init()
generation = int(os.environ.get("RINGSCOPE_ELASTIC_GENERATION", "0"))
state = hvd.elastic.ObjectState(step=0, w=np.zeros(4))
resets = []
state.register_reset_callbacks([lambda: resets.append(hvd.size())])
log = open(args.log, "a") if hvd.rank() == 0 else None


@hvd.elastic.run
def train(state) -> None:
    while state.step < args.steps:
        g = hvd.allreduce(np.full(4, hvd.rank() + 1.0), name="grad", op=hvd.Average)
        state.w = state.w + 0.1 * g
        state.step += 1
        hvd.mark_step()
        if log is not None:
            log.write(json.dumps({"gen": generation, "size": hvd.size(), "step": state.step,
                                  "w": float(state.w[0]), "resets": resets}) + "\n")
            log.flush()
        if generation == 0 and hvd.rank() == args.kill_rank and state.step == args.kill_at_step:
            os.kill(os.getpid(), signal.SIGKILL)
        if hvd.rank() == 0 and state.step == args.touch_at_step:
            Path(args.touch).touch()
        if args.step_sleep:
            time.sleep(args.step_sleep)
        if state.step % args.commit_every == 0:
            state.commit()


train(state)
