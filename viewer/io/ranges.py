"""The ranges a trace's numbers must lie in to become a column, so that the tables' int64 arithmetic cannot overflow."""
from __future__ import annotations

INT32 = 1 << 31            # ranks, sizes, counts, process sets, steps: [0, INT32)
MAX_BYTES = 1 << 48        # 256 TiB: beyond any one tensor, message or fusion buffer
MAX_US = 1e15              # |ts| and dur in µs (~31 years); in ns that is 1e18, int64 holds 9.2e18
MAX_NS = int(MAX_US) * 1000
MAX_SPREAD_US = 1e12       # Kineto: ~11.6 days between a trace's events (epoch µs are ~1.7e15)
MAX_EPOCH_NS = 1 << 62     # a wall clock in ns since 1970 (year 2116)
CHROME_PHASES = frozenset("BEXiICbneSTpFstfPNODMVvRc()")   # the Trace Event Format's "ph" values


def outside(values, ok, lo: int, hi: int):
    """Where a read value (``ok``) is not in ``[lo, hi)``."""
    return ok & ((values < lo) | (values >= hi))


def int_below(v, hi: int):
    """``v`` when it is an int in ``[0, hi)``, else None."""
    return v if v.__class__ is int and 0 <= v < hi else None
