"""Worker for the 2-host checks: every op of tests/mpi_scripts/runtime_ops.py, then this layout's
own checks; rank 0 saves a few allreduce results to $RESULTS_DIR/results.npz, so that a flat and a
hierarchical run can be compared bit for bit."""
import os
import socket
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402
from tests.mpi_scripts import runtime_ops  # noqa: E402

HOSTS = {"h0": (0, 1), "h1": (2, 3)}   # the launch is -H h0:2,h1:2
# name -> (dtype, elements, op): large ones run the ring's reduce-scatter/allgather, small ones
# its direct exchange
COMPARED = {"i32_sum_big": ("int32", 1_000_003, C.Sum), "i64_max": ("int64", 5003, C.Max),
            "u8_min": ("uint8", 7, C.Min), "f32_sum_big": ("float32", 1 << 20, C.Sum),
            "f64_avg": ("float64", 5003, C.Average), "f16_sum": ("float16", 4099, C.Sum)}


def more(check):
    r = C.rank()

    def layout():
        host = socket.gethostname()
        ranks = HOSTS[host]
        got = (C.local_rank(), C.local_size(), C.cross_rank(), C.cross_size())
        want = (ranks.index(r), 2, sorted(HOSTS).index(host), 2)
        assert got == want, f"rank {r} on {host}: local/cross {got}, want {want}"
    check("layout_local_cross", layout)

    def compared():
        saved = {}
        for seed, (name, (dtype, n, op)) in enumerate(COMPARED.items()):
            x = runtime_ops.data(r, n, dtype, 500 + seed, op.value)
            saved[name] = C.allreduce(x, name=f"cmp.{name}", op=op)
            everyone = C.allgather(saved[name].reshape(1, -1), name=f"cmp.{name}.all")
            assert (everyone == everyone[0]).all(), f"{name}: ranks got different bits"
        if r == 0:
            np.savez(os.path.join(os.environ["RESULTS_DIR"], "results.npz"), **saved)
    check("compared_results_identical_on_every_rank", compared)


if __name__ == "__main__":
    runtime_ops.main(more)
