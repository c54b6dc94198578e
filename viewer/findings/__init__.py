"""What stands out in a run: the finding rules, each applied to the runs it fits, most important first."""
from __future__ import annotations

import pandas as pd

from viewer.findings import ddp, elastic, kineto, ranks, runtime  # noqa: F401  (they declare the rules)
from viewer.findings.rule import COLUMNS, JSON_COLUMNS, RULES

__all__ = ["JSON_COLUMNS", "evaluate"]


def evaluate(run, peak_busbw_gbps=None) -> pd.DataFrame:
    """Every rule whose needs the run has, its rows ordered by score (``COLUMNS``)."""
    rows = [row for r in RULES if r.needs <= run.has and not r.unless & run.has for row in r.fn(run, peak_busbw_gbps)]
    return pd.DataFrame(rows, columns=COLUMNS).sort_values("score", ascending=False, kind="stable",
                                                           ignore_index=True)
