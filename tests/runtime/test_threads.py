"""The native core under threads: many submitting threads, waits from other threads, shutdown with
work in flight (tests/mpi_scripts/runtime_threads.py), on real ranks."""
import pytest

from tests.mpi_util import assert_check, run_suite

CHECKS = ["check_threads_submit_at_once", "check_handle_waited_from_other_threads",
          "shutdown_with_work_in_flight"]


@pytest.mark.parametrize("ranks", [2, 4])
def test_threads(tmp_path, ranks):
    results = run_suite(ranks, "runtime_threads.py", tmp_path, timeout=240,
                        env={"RINGSCOPE_STALL_CHECK_TIME_SECONDS": 5})
    for check in CHECKS:
        assert_check(results, check)
