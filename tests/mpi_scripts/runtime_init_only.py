"""Worker: init, one allreduce, shutdown; prints OK (used for env-var and launcher checks)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402

C.init()
y = C.allreduce(np.ones(2), op=C.Sum)
assert (y == C.size()).all()
cfg = C.runtime.config()
print(f"OK rank={C.rank()} size={C.size()} local={C.local_rank()}/{C.local_size()} "
      f"cross={C.cross_rank()}/{C.cross_size()} threshold={cfg.fusion_threshold} "
      f"cycle={cfg.cycle_time_ms} backend={cfg.backend} cores={sorted(os.sched_getaffinity(0))} "
      f"args={sys.argv[1:]}", flush=True)
C.shutdown()
