"""One finding: the row every rule of :mod:`viewer.analyses.recommendations` (and of the analyses that
judge their own results: priorities, recoveries) gives, one sentence with its numbers and an action."""
from __future__ import annotations

COLUMNS = ["kind", "severity", "score", "message"]


def finding(kind: str, severity: str, score, message: str) -> dict:
    return {"kind": kind, "severity": severity, "score": float(score), "message": message}
