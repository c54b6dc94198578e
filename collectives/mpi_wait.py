"""Yielding waits on MPI requests.

MPICH's blocking calls spin at 100 % CPU, and ranks often outnumber cores here, so every wait is a
short burst of ``Test`` calls, then ``os.sched_yield``, then sleeps that grow to ``MAX_SLEEP_S``.
Tuning knobs (for benchmarks; the defaults suit an oversubscribed host): RINGSCOPE_POLL_YIELD_TESTS,
RINGSCOPE_POLL_MAX_SLEEP_US (engine polling for other ranks), RINGSCOPE_DATA_MAX_SLEEP_US (waits
inside a collective).
"""
from __future__ import annotations

import os
import time

# mpi4py.MPI is imported where it is used: importing it starts MPI, which collectives.init does first

SPIN_TESTS = 50         # Test calls before yielding the CPU
YIELD_TESTS = int(os.environ.get("RINGSCOPE_POLL_YIELD_TESTS", 200))  # Test + sched_yield rounds
FIRST_SLEEP_S = 20e-6
MAX_SLEEP_S = float(os.environ.get("RINGSCOPE_POLL_MAX_SLEEP_US", 200)) * 1e-6
# waits inside a collective: peers are usually there already, and MPICH moves large shared-memory
# messages only while both sides poll, so these waits sleep less between tests
DATA_MAX_SLEEP_S = float(os.environ.get("RINGSCOPE_DATA_MAX_SLEEP_US", 50)) * 1e-6


class Backoff:
    """Pause policy: call ``pause()`` after each unsuccessful check, ``reset()`` on progress."""

    __slots__ = ("n", "sleep_s", "max_sleep_s", "sleep")

    def __init__(self, max_sleep_s: float = MAX_SLEEP_S, sleep=time.sleep):
        self.n = 0
        self.sleep_s = FIRST_SLEEP_S
        self.max_sleep_s = max_sleep_s
        self.sleep = sleep   # e.g. a condition wait, so that new work cuts the nap short

    def reset(self) -> None:
        self.n = 0
        self.sleep_s = FIRST_SLEEP_S

    def pause(self) -> None:
        self.n += 1
        if self.n <= SPIN_TESTS:
            return
        if self.n <= SPIN_TESTS + YIELD_TESTS:
            os.sched_yield()
            return
        self.sleep(self.sleep_s)
        self.sleep_s = min(self.sleep_s * 2, self.max_sleep_s)


def wait(request, deadline: float | None = None) -> None:
    """Wait for one buffer request (``Isend``/``Irecv``/``Iallreduce``...) without spinning.

    Raises ``TimeoutError`` past ``deadline`` (a ``time.monotonic()`` value).
    """
    backoff = Backoff(DATA_MAX_SLEEP_S)
    while not request.Test():
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError("MPI request did not complete in time")
        backoff.pause()


def wait_obj(request, deadline: float | None = None):
    """Wait for a pickled-object request (``isend``/``irecv``); return the received object."""
    backoff = Backoff()
    while True:
        done, obj = request.test()
        if done:
            return obj
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError("MPI request did not complete in time")
        backoff.pause()


def wait_all(requests, deadline: float | None = None) -> None:
    """Wait for every uppercase (buffer) request in ``requests``."""
    reqs = [r for r in requests if r is not None]
    if not reqs:
        return
    testall = _testall or _load_testall()
    backoff = Backoff(DATA_MAX_SLEEP_S)
    while not testall(reqs):
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError("MPI requests did not complete in time")
        backoff.pause()


_testall = None   # MPI.Request.Testall, once MPI runs (a per-call import costs ~1 µs)


def _load_testall():
    global _testall
    from mpi4py import MPI
    _testall = MPI.Request.Testall
    return _testall
