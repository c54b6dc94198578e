"""A small real training-like job on the ringscope runtime, for the Nsight overlay tests.

Each step submits a few named allreduces of a few MB (so that every backend phase lasts well over
the 10 µs the alignment must reach) and waits on them; the trace goes to RINGSCOPE_TIMELINE.
"""
import os

import numpy as np

import collectives as rs

STEPS = int(os.environ.get("NSYS_TEST_STEPS", "6"))
SIZES = (1 << 18, 1 << 16, 3000)        # float32 elements per tensor

rs.init()
rng = np.random.default_rng(rs.rank())
for _step in range(STEPS):
    rs.mark_step()
    handles = [rs.allreduce_async(rng.standard_normal(n).astype(np.float32), name=f"grad.layer{i}")
               for i, n in enumerate(SIZES)]
    for h in handles:
        rs.synchronize(h)
rs.mark_step()
rs.shutdown()
