"""Every collectives.torch op against a local reference, on 2 and 4 real MPI ranks."""
import pytest

from tests.mpi_util import assert_check

CHECKS = [
    "check_rank_queries", "check_allreduce_ops_dtypes", "check_allreduce_odd_lengths_and_scale",
    "check_allreduce_inplace_shares_memory", "check_async_poll_and_many_in_flight",
    "check_duplicate_inflight_name_raises", "check_grouped_allreduce", "check_allgather_uneven",
    "check_broadcast_each_root", "check_alltoall", "check_reducescatter",
    "check_autograd_allreduce", "check_autograd_allgather_broadcast", "check_fp16_compression",
    "check_adasum_not_supported", "check_objects_barrier_join", "check_process_sets",
    "check_start_stop_timeline", "check_shape_mismatch_raises_on_every_rank",
    # Horovod drop-in: its names and semantics
    "check_horovod_build_queries", "check_grouped_allgather", "check_grouped_reducescatter",
    "check_reducescatter_gradient", "check_fp16_scale_in_fp32",
    "check_root_rank_is_global_in_process_set", "check_sparse_allreduce_async",
]


@pytest.mark.parametrize("check", CHECKS)
def test_op(suite, check):
    assert_check(suite, check)
