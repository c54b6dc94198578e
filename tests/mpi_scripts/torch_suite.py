"""Worker for tests/torch: runs every torch-frontend check once per launch on each rank.

Usage: torch_suite.py GROUP[,GROUP...]   (groups: ops, optim, state, gloo)
Each check returns a detail string on failure (None when it passed) or raises.
"""
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import collectives.torch as hvd  # noqa: E402
from tests.mpi_util import write_results  # noqa: E402


def main():
    groups = sys.argv[1].split(",") if len(sys.argv) > 1 else ["ops", "optim", "state"]
    hvd.init(process_sets=[hvd.ProcessSet([0, 1])])     # a static set, for the process-set checks
    checks = []
    for g in groups:
        mod = __import__(f"torch_checks_{g}")
        checks += mod.CHECKS
    results = {}
    for fn in checks:
        t0 = time.perf_counter()
        try:
            bad = fn()
            results[fn.__name__] = {"ok": not bad, "detail": bad or "",
                                    "seconds": round(time.perf_counter() - t0, 3)}
        except Exception as exc:  # record and move on; a stall error ends the job instead
            results[fn.__name__] = {"ok": False, "detail": "".join(
                traceback.format_exception_only(type(exc), exc)).strip()[-1500:]}
    write_results(results)
    hvd.shutdown()


if __name__ == "__main__":
    main()
