"""Every collective op on real 2- and 4-rank jobs (one launch per configuration)."""
import pytest

from tests.mpi_util import assert_check, run_suite

CHECKS = ["allreduce_every_op_dtype", "allreduce_sync_every_op_dtype", "allreduce_1000003",
          "allreduce_shapes_scalar_empty", "allreduce_scale_factors", "fused_async_poll",
          "many_tensors_threshold", "grouped_allreduce", "allgather_varying_first_dim", "broadcast_each_root",
          "alltoall_splits", "reducescatter", "barrier_and_unnamed", "gil_switch_interval_lowered",
          "duplicate_name_valueerror",
          "process_sets", "join"]
# ring2/ring3 force the ring schedule for every size (no direct exchange for small buffers), so
# lengths below the rank count and odd rank counts run through the ring itself
# ring4 asks for hierarchical allreduce: on one host every set runs flat after building its layout
CONFIGS = {"ring4": (4, {"RINGSCOPE_BACKEND": "ring", "RINGSCOPE_HIERARCHICAL_ALLREDUCE": 1}),
           "ring2": (2, {"RINGSCOPE_BACKEND": "ring", "RINGSCOPE_RING_DIRECT_BUDGET": 0}),
           "ring3": (3, {"RINGSCOPE_BACKEND": "ring", "RINGSCOPE_RING_DIRECT_BUDGET": 0,
                         "RINGSCOPE_FUSION_THRESHOLD": 64 * 1024}),
           "mpi4": (4, {"RINGSCOPE_BACKEND": "mpi"})}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def suite(request, tmp_path_factory):
    n, env = CONFIGS[request.param]
    return run_suite(n, "runtime_ops.py", tmp_path_factory.mktemp(request.param),
                     env={**env, "RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS": 20}, timeout=120)


@pytest.mark.parametrize("check", CHECKS)
def test_op(suite, check):
    assert_check(suite, check)
