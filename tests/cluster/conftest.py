"""A rehearsal cluster for the tests: up once per test that asks, always torn down after, and
checked to leave nothing behind (no namespace, link, file, or process inside its namespaces)."""
import contextlib
import fcntl

import pytest

from collectives import cluster

# The cluster is one per machine (fixed names and subnet): checkouts testing side by side take turns.
LOCK = "/tmp/ringscope-cluster.lock"
_held = [0]   # this process's nesting depth (a second flock on a new descriptor would wait on us)


@contextlib.contextmanager
def cluster_lock():
    """Hold the machine's cluster lock (re-entrant within this process)."""
    if _held[0]:
        _held[0] += 1
        try:
            yield
        finally:
            _held[0] -= 1
        return
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _held[0] = 1
        try:
            yield
        finally:
            _held[0] = 0


@pytest.fixture(autouse=True)
def one_cluster_at_a_time():
    with cluster_lock():
        yield


def namespace_inodes() -> set[int]:
    return cluster.netns_inodes(cluster.our_netns())


processes_in = cluster.processes_in


def skip_unless_possible() -> None:
    problem = cluster.root_problem()
    if problem:
        pytest.skip(f"ringscope cluster {problem}")
    if cluster.read_state() is not None:
        pytest.skip("a ringscope cluster is up already (not this test's): leaving it alone")


def assert_all_gone(inodes: set[int]) -> None:
    assert cluster.leftovers() == []
    assert processes_in(inodes) == []


@pytest.fixture
def two_hosts():
    """2 hosts x 2 slots, torn down however the test ends."""
    skip_unless_possible()
    inodes: set[int] = set()
    try:
        state = cluster.up(2, 2)
        inodes = namespace_inodes()
        yield state
    finally:
        cluster.down()
        assert_all_gone(inodes)
