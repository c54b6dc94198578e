"""Worker for the cluster tests: init, allreduce (sum, average, max) of 1 KiB and 4 MiB, checked
against the exact answer; writes this rank's layout and results to $RESULTS_DIR/rank-<r>.json."""
import json
import os
import socket
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402

C.init()
rank, size = C.rank(), C.size()
errors = []
for n in (256, 1 << 20):   # float32: 1 KiB and 4 MiB
    x = np.arange(n, dtype=np.float32) % 1000 + rank
    want = (np.arange(n, dtype=np.float32) % 1000) * size + size * (size - 1) / 2
    for op, expect in ((C.Sum, want), (C.Average, want / size),
                       (C.Max, np.arange(n, dtype=np.float32) % 1000 + size - 1)):
        got = C.allreduce(x, name=f"x{n}.{op}", op=op)
        if not np.allclose(got, expect, rtol=1e-6):
            errors.append(f"{op} of {n} floats: off by up to {np.abs(got - expect).max()}")
out = {"rank": rank, "size": size, "host": socket.gethostname(), "local_rank": C.local_rank(),
       "local_size": C.local_size(), "cross_rank": C.cross_rank(), "cross_size": C.cross_size(),
       "errors": errors}
with open(os.path.join(os.environ["RESULTS_DIR"], f"rank-{rank}.json"), "w") as f:
    json.dump(out, f)
C.shutdown()
