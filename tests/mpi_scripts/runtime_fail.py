"""Worker: rank 1 raises after init while the others wait in an allreduce (must not hang)."""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402

C.init()
if C.rank() == 1:
    time.sleep(0.2)
    raise RuntimeError("boom from rank 1")
C.allreduce(np.ones(3), name="never.completes")
print("UNREACHABLE: allreduce returned", flush=True)
