"""Worker for the priority-wait test: each step every rank submits a large low-priority allreduce
("lo", priority 0) and a small high-priority one ("hi", priority 5); rank 0 submits "hi" right
after "lo", rank 1 LATE_MS later. On rank 0 "hi" therefore waits while "lo" runs.

env: STEPS (3), LATE_MS (40).
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
big = np.ones(2 * 1024 * 1024, dtype=np.float32)
small = np.ones(256, dtype=np.float32)
for step in range(int(os.environ.get("STEPS", "3"))):
    tracer.mark_step(step)
    lo = C.allreduce_async(big, name="lo", op=C.Sum)
    if rank == 1:
        time.sleep(float(os.environ.get("LATE_MS", "40")) / 1000)
    hi = C.allreduce_async(small, name="hi", op=C.Sum, priority=5)
    C.synchronize(lo)
    C.synchronize(hi)
C.shutdown()
