"""The wall clock that traces and clock-offset measurements share.

``RINGSCOPE_TEST_CLOCK_SKEW_US`` (tests only) shifts this rank's wall clock, so that tests can check
that the recorded offsets line ranks up again.
"""
import os
import time

_SKEW_NS = int(float(os.environ.get("RINGSCOPE_TEST_CLOCK_SKEW_US", "0") or 0) * 1000)


def wall_ns() -> int:
    """UTC wall-clock nanoseconds (plus the test skew, if any)."""
    return time.time_ns() + _SKEW_NS


def mono_ns() -> int:
    """Monotonic nanoseconds; the time base of every event on one rank."""
    return time.perf_counter_ns()
