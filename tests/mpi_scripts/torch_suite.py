"""Worker for tests/torch: runs every torch-frontend check once per launch on each rank.

Usage: torch_suite.py GROUP[,GROUP...]   (groups: ops, optim, state, gloo)
Each check returns a detail string on failure (None when it passed) or raises.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import collectives.torch as hvd  # noqa: E402
from tests.mpi_util import run_checks, write_results  # noqa: E402


def main():
    groups = sys.argv[1].split(",") if len(sys.argv) > 1 else ["ops", "optim", "state"]
    hvd.init(process_sets=[hvd.ProcessSet([0, 1])])     # a static set, for the process-set checks
    checks = []
    for g in groups:
        mod = __import__(f"torch_checks_{g}")
        checks += mod.CHECKS
    results = run_checks(checks)
    write_results(results)
    hvd.shutdown()


if __name__ == "__main__":
    main()
