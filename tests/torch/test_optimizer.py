"""DistributedOptimizer on real ranks: same parameters everywhere, equal to one process training on
the combined batch; backward_passes_per_step, fp16 compression, unused parameters, Horovod's errors."""
import pytest

from tests.mpi_util import assert_check

CHECKS = [
    "check_optimizer_matches_combined_batch", "check_backward_passes_per_step_2",
    "check_fp16_compression_training", "check_gradient_predivide_factor",
    "check_param_without_grad_no_deadlock", "check_duplicate_and_missing_names",
    "check_synchronize_then_skip_synchronize", "check_zero_grad_before_step_is_refused",
    "check_groups_match_combined_batch", "check_too_many_backward_passes_refused",
    "check_sync_batch_norm_matches_combined_batch", "check_join_with_uneven_batches",
    "check_outside_process_set_is_local_optimizer", "check_sparse_gradients",
    "check_step_after_synchronize_warns_as_horovod",
]


@pytest.mark.parametrize("check", CHECKS)
def test_optimizer(suite, check):
    assert_check(suite, check)
