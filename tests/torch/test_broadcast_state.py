"""broadcast_parameters / broadcast_optimizer_state restore rank 0's state on every rank, for SGD
with momentum, Adam, AdamW, RMSprop and Adagrad (state created lazily or not at all)."""
import pytest

from tests.mpi_util import assert_check

CHECKS = [
    "check_broadcast_state_sgd", "check_broadcast_state_adam", "check_broadcast_state_adamw",
    "check_broadcast_state_rmsprop", "check_broadcast_state_adagrad",
    "check_broadcast_state_root_has_none_yet", "check_broadcast_state_distributed_optimizer",
    "check_broadcast_parameters_forms", "check_broadcast_state_fresh_distributed_optimizer",
]


@pytest.mark.parametrize("check", CHECKS)
def test_broadcast_state(suite, check):
    assert_check(suite, check)
