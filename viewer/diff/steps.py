"""The headline of a diff: each run's steady-state step time, the change, and whether it is beyond the noise."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

ALPHA = 0.05          # Mann–Whitney's two-sided p below this: the change is beyond the noise
WARMUP_MIN_STEPS = 4  # a run with this many steps or more loses its first one as warm-up
RESAMPLES = 2000      # bootstrap resamples for the change's interval


def steady_steps(run) -> pd.Series:
    """Per steady-state step: its time (ns), the mean over the ranks; empty when the run marks no steps."""
    st = run.step_times()
    per_step = st.groupby("step")["dur_ns"].mean().astype("float64").sort_index()
    if len(per_step) >= WARMUP_MIN_STEPS:
        per_step = per_step.iloc[1:]
    return per_step


def representative(steps: pd.Series) -> int | None:
    """The steady step whose time is nearest their median (the one to open in a timeline)."""
    return int((steps - steps.median()).abs().idxmin()) if len(steps) else None


def _interval_pct(a: np.ndarray, b: np.ndarray) -> tuple[float | None, float | None]:
    """95 % bootstrap interval (percentile) of the change of the mean step, in percent of A's."""
    from scipy import stats  # scipy only when two runs are compared

    def change(x, y, axis=-1):
        return (np.mean(y, axis=axis) / np.mean(x, axis=axis) - 1.0) * 100.0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # identical samples: a degenerate interval, which is the answer
        res = stats.bootstrap((a, b), change, vectorized=True, paired=False, n_resamples=RESAMPLES,
                              method="percentile", rng=np.random.default_rng(0))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return (None if np.isnan(lo) else lo), (None if np.isnan(hi) else hi)


def _range(steps: pd.Series) -> str:
    s = steps.index
    return f"steps {int(s.min())}–{int(s.max())}" if len(s) > 1 else f"step {int(s[0])}"


def headline(a_steps: pd.Series, b_steps: pd.Series) -> dict:
    """The step time of each run (mean of its steady steps), the change, and Mann–Whitney's verdict on it."""
    out: dict = {"a_step_ms": None, "b_step_ms": None, "change_ms": None, "change_pct": None,
                 "change_ci_pct": [None, None], "p_value": None, "significant": False, "testable": False,
                 "steps": [len(a_steps), len(b_steps)], "runs": [1, 1]}
    if not len(a_steps) or not len(b_steps):
        missing = [n for n, s in (("A", a_steps), ("B", b_steps)) if not len(s)]
        out["compared"] = (f"nothing: {' and '.join(missing)} mark{'s' if len(missing) == 1 else ''} no steps "
                           "(no STEP spans or ProfilerStep#N)")
        return out
    a, b = a_steps.to_numpy(), b_steps.to_numpy()
    out.update(a_step_ms=float(a.mean()) / 1e6, b_step_ms=float(b.mean()) / 1e6)
    out["change_ms"] = out["b_step_ms"] - out["a_step_ms"]
    out["change_pct"] = 100.0 * out["change_ms"] / out["a_step_ms"] if out["a_step_ms"] else None
    warm = f"; each run's first step dropped as warm-up when it has {WARMUP_MIN_STEPS} or more"
    out["compared"] = (f"per-step time (the mean over ranks) of A's {_range(a_steps)} ({len(a)}) against B's "
                       f"{_range(b_steps)} ({len(b)}){warm}; Mann–Whitney U, two-sided, α = {ALPHA}; the change "
                       f"of the mean step with its 95 % bootstrap interval; one run a side, so the test sees "
                       f"the noise between steps, not between reruns, which can be larger: give several runs a side "
                       "(--a A1 A2 A3 --b B1 B2 B3) to see it")
    if len(a) >= 2 and len(b) >= 2:
        from scipy import stats

        p = float(stats.mannwhitneyu(b, a, alternative="two-sided").pvalue)
        out["p_value"] = p
        out["significant"] = bool(p < ALPHA)
        out["change_ci_pct"] = list(_interval_pct(a, b))
        smallest = float(stats.mannwhitneyu(np.arange(len(b)) + len(a), np.arange(len(a)),
                                            alternative="two-sided").pvalue)
        out["testable"] = smallest < ALPHA
        if smallest >= ALPHA:
            out["compared"] += (f"; with {len(a)} and {len(b)} steps no change can be called beyond the noise "
                                f"(the smallest p possible is {smallest:.2f})")
    else:
        out["compared"] += "; too few steps for a test (two or more on each side)"
    return out
