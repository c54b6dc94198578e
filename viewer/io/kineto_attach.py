"""A Kineto trace beside our own trace of the same rank: its events join that rank's, on one axis.

Both are the rank's wall clock: ours is ``base_epoch_ns`` + local ns, Kineto's
``baseTimeNanoseconds`` + ts (``base_epoch_ns`` of its file). So the Kineto events move by the
difference of the two bases into our file's local time, and our rank's clock offset then places both.
Its collectives are not added (ours describe them); its CPU threads and GPU streams become lanes of
that rank beside ours. Not refined on shared spans: nothing both tracers record is matched yet.
"""
from __future__ import annotations

from viewer.errors import TraceError


def attach(parsed: list[dict]) -> list[dict]:
    """``parsed`` without the Kineto files that have our trace of the same rank, their events moved
    into that trace's ``events`` (``meta["kineto_files"]`` lists them)."""
    import pandas as pd

    from viewer import frames

    ours = {p["rank_info"]["rank"]: p for p in parsed
            if p["rank_info"].get("format") != "kineto" and p["meta"].get("part") in (None, 0)}
    out = []
    for p in parsed:
        ri = p["rank_info"]
        host = ours.get(ri["rank"]) if ri.get("format") == "kineto" else None
        if host is None:
            out.append(p)
            continue
        base_k, base_o = ri.get("base_epoch_ns"), host["rank_info"].get("base_epoch_ns")
        if base_k is None or base_o is None:
            other = host["rank_info"]["file"]
            raise TraceError(ri["file"], f"cannot share rank {ri['rank']}'s time axis with {other}: "
                                         "one of them records no wall-clock time")
        shift = int(base_k) - int(base_o)
        ev = p["events"]
        ev["t_ns"] += shift
        if "launch_ns" in ev:
            ev["launch_ns"] += shift
        merged = pd.concat([host["events"], ev], ignore_index=True)
        host["events"] = frames.conform("events", merged.sort_values("t_ns", kind="stable", ignore_index=True))
        last = ri.get("last_ts_ns")
        if last is not None and host["rank_info"].get("last_ts_ns") is not None:
            host["rank_info"]["last_ts_ns"] = max(host["rank_info"]["last_ts_ns"], last + shift)
        host["meta"].setdefault("kineto_files", []).append(ri["file"])
    return out
