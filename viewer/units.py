"""The one formatter of figures for people: durations, sizes, bandwidths, shares and counts, each in
the unit its magnitude calls for. The CLI, the findings' sentences and the dashboard all use it."""
from __future__ import annotations

import math

MISSING = "–"
_TIME = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))
_SIZE = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))
_RATE = ((1e3, "TB/s"), (1.0, "GB/s"), (1e-3, "MB/s"), (1e-6, "KB/s"))


def _missing(v) -> bool:
    if v is None or v.__class__.__name__ in ("NAType", "NaTType"):
        return True
    try:
        return math.isnan(float(v))
    except (TypeError, ValueError):
        return False


def _num(v: float) -> str:
    """Three significant figures at most, never fewer digits than the integer part."""
    a = abs(v)
    return f"{v:.2f}" if a < 10 else f"{v:.1f}" if a < 100 else f"{v:.0f}"


def _scaled(v: float, scale, last: str) -> str:
    for div, unit in scale:
        if abs(v) >= div:
            return f"{_num(v / div)} {unit}"
    return f"{_num(v / scale[-1][0])} {last}"


def duration(ns) -> str:
    """1_234_567 -> '1.23 ms'; -4_794_000 -> '-4.79 ms'; 0 -> '0 ns'."""
    if _missing(ns):
        return MISSING
    ns = float(ns)
    return "0 ns" if ns == 0 else _scaled(ns, _TIME, "ns").replace(".00 ns", " ns")


def size(n) -> str:
    """1536 -> '1.5 KiB'; 512 -> '512 B'; 134217728 -> '128 MiB'."""
    if _missing(n):
        return MISSING
    n = float(n)
    for div, unit in _SIZE:
        if abs(n) >= div:
            return f"{n / div:.1f} {unit}".replace(".0 ", " ")
    return f"{n:.0f} B"


def rate(gbps) -> str:
    """GB/s (1e9 bytes per second): 10.98 -> '11.0 GB/s'; 0.012 -> '12.0 MB/s'."""
    if _missing(gbps):
        return MISSING
    g = float(gbps)
    return "0 GB/s" if g == 0 else _scaled(g, _RATE, "KB/s")


def pct(p) -> str:
    """A share in percent: 45.2 -> '45 %'; 4.13 -> '4.1 %'; 0.04 -> '<0.1 %'."""
    if _missing(p):
        return MISSING
    p = float(p)
    if p == 0:
        return "0 %"
    if abs(p) < 0.1:
        return "<0.1 %" if p > 0 else ">-0.1 %"
    return f"{p:.1f} %" if abs(p) < 10 else f"{p:.0f} %"


def count(n) -> str:
    """1234 -> '1,234'."""
    return MISSING if _missing(n) else f"{int(n):,}"


def number(v) -> str:
    """A plain figure (a ratio, tensors per op): three significant figures."""
    return MISSING if _missing(v) else _num(float(v))


def _scaled_by(f, k):
    return lambda v: f(None if _missing(v) else float(v) * k)


def text(v) -> str:
    return MISSING if _missing(v) else str(v)


# a column's unit -> its formatter; "us" and "ms" are durations given in those units, "ratio" a share of 1
UNITS = {"ns": duration, "us": _scaled_by(duration, 1e3), "ms": _scaled_by(duration, 1e6), "bytes": size,
         "gbps": rate, "pct": pct, "ratio": _scaled_by(pct, 100), "count": count, "num": number, "text": text}


def fmt(value, unit) -> str:
    """``value`` in ``unit`` (a key of ``UNITS``, or a formatter of its own) for people."""
    return UNITS[unit](value) if isinstance(unit, str) else unit(value)
