"""Medians, pair-by-pair ratios and the nccl-tests bandwidth conventions."""
from __future__ import annotations

import statistics


def median(xs) -> float:
    xs = [x for x in xs if x is not None]
    return float(statistics.median(xs)) if xs else float("nan")


def paired_ratio(num, den) -> float:
    """Median over reps of ``num[i] / den[i]`` (the pairs were measured back to back)."""
    return median([a / b for a, b in zip(num, den) if b])


def ratio_range(num, den) -> str:
    """"lo-hi" of the per-rep ratios ``num[i] / den[i]`` (the spread behind a paired median)."""
    rs = [a / b for a, b in zip(num, den) if b]
    return f"{min(rs):.3g}-{max(rs):.3g}" if rs else "n/a"


def allreduce_bw(nbytes: int, seconds: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9): algbw = S/t, busbw = algbw * 2(n-1)/n."""
    if not seconds or seconds != seconds:
        return float("nan"), float("nan")
    alg = nbytes / seconds / 1e9
    return alg, alg * 2 * (ranks - 1) / ranks


def human_bytes(n: float) -> str:
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f:
            v = n / f
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{int(n)} B"


def paired_mean_ratio(num, den) -> tuple[float, float]:
    """``mean(num) / mean(den)`` over back-to-back pairs, and its standard error (from the spread
    of the paired differences ``num[i] - den[i]``)."""
    n = min(len(num), len(den))
    if n < 2:
        return float("nan"), float("nan")
    diffs = [a - b for a, b in zip(num[:n], den[:n])]
    base = statistics.fmean(den[:n])
    return 1 + statistics.fmean(diffs) / base, statistics.stdev(diffs) / n ** 0.5 / base


def paired_mean_diff(num, den) -> tuple[float, float]:
    """``mean(num - den)`` over back-to-back pairs and its standard error."""
    n = min(len(num), len(den))
    diffs = [a - b for a, b in zip(num[:n], den[:n])]
    if n < 2:
        return float("nan"), float("nan")
    return statistics.fmean(diffs), statistics.stdev(diffs) / n ** 0.5
