"""Worker: record only a window of the run with start_timeline/stop_timeline (path in argv[1])."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402

C.init()
C.allreduce(np.ones(3), name="before")
C.start_timeline(sys.argv[1], mark_cycles=True)
for step in range(3):
    C.mark_step(step)
    C.allreduce(np.ones(3), name="during")
C.stop_timeline()
C.allreduce(np.ones(3), name="after")
C.shutdown()
