"""The headline with several runs a side: each run's mean step, and the change tested against the spread
between the runs (Welch's t-test on the log of the runs' means), not against the steps of one run.

The log: a busier machine slows a run by a factor, not by a fixed time, so the runs' means spread
multiplicatively; the test on their logs is a test of the ratio B/A, and its interval, turned back into
percent, carries A's uncertainty as well as B's."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from viewer.diff.steps import ALPHA, WARMUP_MIN_STEPS

CONFIDENCE = 0.95


def run_means(sides: list[pd.Series]) -> np.ndarray:
    """Each run's step time (ns): the mean of its steady steps; runs that mark no steps are left out."""
    return np.array([float(s.mean()) for s in sides if len(s)], dtype="float64")


def representative(sides: list[pd.Series]) -> int:
    """The index of the run whose step time is nearest the median of the runs' (the side's median run)."""
    means = np.array([float(s.mean()) if len(s) else np.nan for s in sides])
    if np.isnan(means).all():
        return 0
    return int(np.nanargmin(np.abs(means - np.nanmedian(means))))


def _ms(values: np.ndarray) -> str:
    return ", ".join(f"{v / 1e6:.1f}" for v in values)


def headline(a_sides: list[pd.Series], b_sides: list[pd.Series]) -> dict:
    """The step time of each side (the mean of its runs' mean steps), the change, and a t-test on the log of
    the runs' means: Welch's with two runs or more a side, Student's pooled one when a side has a single run
    (its spread is then taken to be the other side's)."""
    a, b = run_means(a_sides), run_means(b_sides)
    out: dict = {"a_step_ms": None, "b_step_ms": None, "change_ms": None, "change_pct": None,
                 "change_ci_pct": [None, None], "p_value": None, "significant": False, "testable": False,
                 "steps": [sum(len(s) for s in a_sides), sum(len(s) for s in b_sides)],
                 "runs": [len(a_sides), len(b_sides)]}
    if not len(a) or not len(b):
        missing = [n for n, s in (("A", a), ("B", b)) if not len(s)]
        out["compared"] = (f"nothing: {' and '.join(missing)} mark{'s' if len(missing) == 1 else ''} no steps "
                           "(no STEP spans or ProfilerStep#N)")
        return out
    out.update(a_step_ms=float(a.mean()) / 1e6, b_step_ms=float(b.mean()) / 1e6)
    out["change_ms"] = out["b_step_ms"] - out["a_step_ms"]
    out["change_pct"] = 100.0 * out["change_ms"] / out["a_step_ms"] if out["a_step_ms"] else None
    left_out = len(a_sides) + len(b_sides) - len(a) - len(b)
    welch = min(len(a), len(b)) >= 2
    test = "Welch's t-test" if welch else "Student's t-test (pooled: one run a side has no spread of its own)"
    out["compared"] = (f"each run's mean step (its steady steps, the mean over ranks; a run's first step dropped "
                       f"as warm-up when it has {WARMUP_MIN_STEPS} or more): A's {len(a)} runs ({_ms(a)} ms) "
                       f"against B's {len(b)} ({_ms(b)} ms); {test} on the log of the runs' means (the ratio B/A), "
                       f"two-sided, α = {ALPHA}, so the test sees the spread between reruns; the change's 95 % "
                       "interval from the same test (the ratio of the runs' geometric means)"
                       + (f"; {left_out} run{'s' if left_out > 1 else ''} without steps left out" if left_out else ""))
    if len(a) + len(b) < 3:
        out["compared"] += "; too few runs for a test (three or more in all, two or more on one side)"
        out["why_untestable"] = f"too few runs ({len(a)} and {len(b)}) with steps to tell a change from the noise"
        return out
    from scipy import stats  # scipy only when runs are compared

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # runs of identical means: no spread, p is nan (no change) or 0
        res = stats.ttest_ind(np.log(b), np.log(a), equal_var=not welch)
        ci = res.confidence_interval(confidence_level=CONFIDENCE)
    out["testable"] = True
    p = float(res.pvalue)
    if not np.isnan(p):
        out["p_value"] = p
        out["significant"] = bool(p < ALPHA)
    out["change_ci_pct"] = [None if np.isnan(v) else float(np.expm1(v) * 100.0) for v in (ci.low, ci.high)]
    return out
