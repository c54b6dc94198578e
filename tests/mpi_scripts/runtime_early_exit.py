"""Worker: rank 1 shuts down while the others wait on an allreduce it never submits.

The waiting ranks must get a clear error at once instead of hanging. With ``cached``, every rank
runs the allreduce once first, so that the others' second one waits in the response cache. With
``join``, the others wait in join() instead (a rank that shut down never joins).
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402

C.init()
if sys.argv[1:] == ["cached"]:
    C.allreduce(np.ones(3), name="orphan")
if C.rank() == 1:
    C.shutdown()
    print("rank 1 shut down", flush=True)
else:
    t0 = time.monotonic()
    try:
        if sys.argv[1:] == ["join"]:
            C.join()
        else:
            C.allreduce(np.ones(3), name="orphan")
    except C.CollectiveError as exc:
        print(f"rank {C.rank()} error after {time.monotonic() - t0:.2f}s: {exc}", flush=True)
    C.shutdown()
