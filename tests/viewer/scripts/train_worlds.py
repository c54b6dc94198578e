"""Worker for the elastic viewer test: one world of a job that a driver relaunches (docs/ELASTIC.md).

env: START (first step, 0), STEPS (steps to run, 6), DIE_RANK / DIE_STEP (that rank SIGKILLs itself after
submitting that step's first tensor: the world fails there; -1 none), COMMIT_EVERY (4): an ELASTIC_COMMIT
slice on every rank after each such step, GENERATION (0). A world after the first also records
ELASTIC_RESTORE before its first step and ELASTIC_RESET from init to that step's end, except on
NO_RESET_RANK.
"""
import os
import signal
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
import collectives as C  # noqa: E402
import tracer  # noqa: E402
from tracer import vocab as V  # noqa: E402

C.init()
rank = C.rank()
rec = tracer.get_recorder()
t_init = rec.base_ns
env = os.environ.get
start, steps = int(env("START", "0")), int(env("STEPS", "6"))
die_rank, die_step = int(env("DIE_RANK", "-1")), int(env("DIE_STEP", "-1"))
commit_every, gen = int(env("COMMIT_EVERY", "4")), int(env("GENERATION", "0"))
sizes = [1024, 4096, 65536]
if gen:
    t0 = rec.now()
    C.broadcast(np.zeros(16, dtype=np.float32), root_rank=0, name="state")
    rec.complete(V.TID_FRAMEWORK, V.ELASTIC_RESTORE, V.CAT_ELASTIC, t0, rec.now(), {"bytes": 64})
for step in range(start, start + steps):
    tracer.mark_step(step)
    if gen and step == start + 1 and rank != int(env("NO_RESET_RANK", "-1")):
        rec.complete(V.TID_FRAMEWORK, V.ELASTIC_RESET, V.CAT_ELASTIC, t_init, rec.now(), {"generation": gen})
    handles = []
    for i, n in enumerate(sizes):
        handles.append(C.allreduce_async(np.full(n, rank, dtype=np.float32), name=f"grad.{i}"))
        if rank == die_rank and step == die_step:
            tracer.flush()
            os.kill(os.getpid(), signal.SIGKILL)
    for h in handles:
        C.synchronize(h)
    time.sleep(0.05)
    if (step + 1) % commit_every == 0:
        t0 = rec.now()
        C.barrier()
        rec.complete(V.TID_FRAMEWORK, V.ELASTIC_COMMIT, V.CAT_ELASTIC, t0, rec.now(), {"bytes": 64, "step": step})
tracer.mark_step()
C.shutdown()
