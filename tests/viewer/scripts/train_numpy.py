"""Worker for the viewer's real-run tests: a few "training steps" of numpy allreduces on every rank.

env: STEPS (4), SLOW_RANK (-1: none; that rank sleeps SLOW_MS before submitting each step).
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
import collectives as C  # noqa: E402
import tracer  # noqa: E402

C.init()
rank = C.rank()
slow = int(os.environ.get("SLOW_RANK", "-1"))
sizes = [1024, 4096, 65536, 262144]
for step in range(int(os.environ.get("STEPS", "4"))):
    tracer.mark_step(step)
    if rank == slow:
        time.sleep(float(os.environ.get("SLOW_MS", "30")) / 1000)
    handles = [C.allreduce_async(np.full(n, rank, dtype=np.float32), name=f"grad.{i}") for i, n in enumerate(sizes)]
    for h in handles:
        C.synchronize(h)
C.shutdown()
