"""Shared launches: one real MPI job per rank count runs every torch-frontend check."""
import pytest

from tests.mpi_util import run_suite

ENV = {"RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS": "30", "OMP_NUM_THREADS": "1"}


def _suite(tmp_path_factory, n, groups, extra=None):
    return run_suite(n, "torch_suite.py", tmp_path_factory.mktemp(f"torch{n}"),
                     env={**ENV, **(extra or {})}, args=[groups], timeout=240)


@pytest.fixture(scope="session")
def suite2(tmp_path_factory):
    return _suite(tmp_path_factory, 2, "ops,optim,state")


@pytest.fixture(scope="session")
def suite4(tmp_path_factory):
    return _suite(tmp_path_factory, 4, "ops,optim,state")


@pytest.fixture(scope="session")
def suite_gloo(tmp_path_factory):
    return _suite(tmp_path_factory, 2, "gloo,ops,optim", {"RINGSCOPE_BACKEND": "gloo"})


@pytest.fixture(params=[2, 4], ids=["2ranks", "4ranks"])
def suite(request):
    return request.getfixturevalue(f"suite{request.param}")
