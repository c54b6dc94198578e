"""Worker: a few training-like steps with a real timeline (RINGSCOPE_TIMELINE set by the test)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402

C.init()
r = C.rank()
for step in range(3):
    C.mark_step(step)
    hs = [C.allreduce_async(np.full(50 + i, float(r)), name=f"grad.{i}") for i in range(8)]
    for h in hs:
        C.synchronize(h)
    C.allreduce(np.ones(300_000, np.float32), name="grad.big")
    C.broadcast(np.ones(4), 0, name="params")
C.shutdown()
