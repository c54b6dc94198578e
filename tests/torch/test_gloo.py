"""RINGSCOPE_BACKEND=gloo: CPU tensors through torch's gloo process groups (2 real ranks), with the
op and optimizer checks run again on that backend."""
import pytest

from tests.mpi_util import assert_check
from tests.torch.test_ops import CHECKS as OPS
from tests.torch.test_optimizer import CHECKS as OPTIM


def test_gloo_group_carries_the_ops(suite_gloo):
    assert_check(suite_gloo, "check_gloo_group_carries_the_ops")


@pytest.mark.parametrize("check", OPS + OPTIM)
def test_on_gloo(suite_gloo, check):
    assert_check(suite_gloo, check)
