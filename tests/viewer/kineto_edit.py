"""An edit tool for real Kineto traces: a copy with one kernel family's GPU time slowed by a factor."""
from __future__ import annotations

import gzip
import json
from pathlib import Path


def slow_family(src: Path, dst: Path, family: str, factor: float = 1.2) -> int:
    """Copy the trace ``src`` (.json or .json.gz) to ``dst`` with every kernel whose name contains ``family``
    lasting ``factor`` times as long; returns how many kernels were slowed."""
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt") as f:
        trace = json.load(f)
    slowed = 0
    for ev in trace["traceEvents"]:
        if ev.get("cat") == "kernel" and family in ev.get("name", "") and "dur" in ev:
            ev["dur"] = ev["dur"] * factor
            slowed += 1
    dst.parent.mkdir(parents=True, exist_ok=True)
    with (gzip.open if dst.suffix == ".gz" else open)(dst, "wt") as f:
        json.dump(trace, f)
    return slowed
