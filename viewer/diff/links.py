"""The cross-host link of each run: how long it carried the collectives per step, how long the ranks waited on
it, and its busbw on the big messages (from ``cross_link`` and ``link_ops``)."""
from __future__ import annotations

from viewer.summary import hosts


def cross_link(run, steps) -> dict | None:
    """``hosts``, ``busy_ms``, ``waited_ms`` (mean per step over ranks) and ``busbw_gbps`` (median of the biggest
    quarter of cross-host ops); None on one host."""
    if run.why_not("cross_link") is not None:
        return None
    cl = run.cross_link()
    ops = run.link_ops()
    ops = ops[ops["link"] == "cross"]
    if len(steps) and (ops["step"] >= 0).any():
        ops = ops[ops["step"].isin(steps)]
    big = ops[ops["op_bytes"] >= ops["op_bytes"].quantile(0.75)] if len(ops) else ops
    return {"hosts": list(hosts(run.ranks)), "busy_ms": float(cl["cross_ns"].mean()) / 1e6,
            "waited_ms": float(cl["exposed_cross_ns"].mean()) / 1e6,
            "busbw_gbps": float(big["busbw_gbps"].median()) if len(big) else None}


def link_changes(ra, rb, a_steps, b_steps) -> dict:
    """Each run's :func:`cross_link` (``a``, ``b``)."""
    return {"a": cross_link(ra, a_steps), "b": cross_link(rb, b_steps)}
