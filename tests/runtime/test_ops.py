"""Every collective op on real 2- and 4-rank jobs (one launch per configuration)."""
import pytest

from tests.mpi_util import assert_check, run_suite

CHECKS = ["allreduce_every_op_dtype", "allreduce_sync_every_op_dtype", "allreduce_1000003",
          "allreduce_shapes_scalar_empty", "allreduce_scale_factors", "fused_async_poll",
          "grouped_allreduce", "allgather_varying_first_dim", "broadcast_each_root",
          "alltoall_splits", "reducescatter", "barrier_and_unnamed", "duplicate_name_valueerror",
          "process_sets"]
CONFIGS = {"ring4": (4, "ring"), "ring2": (2, "ring"), "mpi4": (4, "mpi")}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def suite(request, tmp_path_factory):
    n, backend = CONFIGS[request.param]
    return run_suite(n, "runtime_ops.py", tmp_path_factory.mktemp(request.param),
                     env={"RINGSCOPE_BACKEND": backend}, timeout=240)


@pytest.mark.parametrize("check", CHECKS)
def test_op(suite, check):
    assert_check(suite, check)
