"""Randomized interleavings over overlapping process sets (ring with fusion, and mpi)."""
import pytest

from tests.mpi_util import assert_check, run_suite


@pytest.mark.parametrize("backend,threshold", [("ring", 4096), ("mpi", 128 << 20)])
def test_random_interleavings(tmp_path, backend, threshold):
    results = run_suite(4, "runtime_stress.py", tmp_path, timeout=120,
                        env={"RINGSCOPE_BACKEND": backend,
                             "RINGSCOPE_FUSION_THRESHOLD": threshold,
                             "RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS": 30})
    assert_check(results, "stress")
