"""Cross-rank errors, bad local input and the stall inspector on a real 3-rank job."""
import pytest

from tests.mpi_util import assert_check, run_suite

CHECKS = ["mismatch_shape", "mismatch_dtype", "mismatch_op", "mismatch_root", "mismatch_scale",
          "mismatch_op_type", "mismatch_allgather_trailing", "grouped_mismatch_fails_group",
          "works_after_errors", "bad_local_input", "stall_shutdown", "works_after_stall"]


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return run_suite(3, "runtime_errors.py", tmp_path_factory.mktemp("errors"), timeout=90,
                     env={"RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS": "1.5",
                          "RINGSCOPE_STALL_CHECK_TIME_SECONDS": "0.5"})


@pytest.mark.parametrize("check", CHECKS)
def test_error_case(suite, check):
    assert_check(suite, check)
