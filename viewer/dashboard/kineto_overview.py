"""The Overview page's block for Kineto runs: compute, communication and overlap per rank."""
from __future__ import annotations

from dash import html

from viewer.dashboard.components import table
from viewer.kineto import overlap, temporal


def block(tables) -> list:
    """An H3 and a table (GPU time per rank), or [] when the run holds no Kineto trace with GPU work."""
    if not (tables.ranks["format"] == "kineto").any() and "launch_ns" not in tables.events.columns:
        return []

    tb = temporal.temporal_breakdown(tables)
    if tb.empty:
        return []
    ov = overlap.comm_comp_overlap(tables)[["rank", "overlap_pct", "exposed_ns"]]
    df = tb.merge(ov, on="rank", how="left")
    df = df.assign(kernel_time_ms=df["kernel_time_ns"] / 1e6, communication_ms=df["communication_ns"] / 1e6,
                   exposed_comm_ms=df["exposed_ns"] / 1e6)
    cols = ["rank", "kernel_time_ms", "compute_pct", "non_compute_pct", "idle_pct", "communication_ms",
            "overlap_pct", "exposed_comm_ms"]
    fmt = {c: "{:,.2f}" for c in cols[1:]}
    return [html.H3("GPU time per rank (torch.profiler: compute, communication, overlap)"),
            table(df[cols], fmt, table_id="ov-kineto")]
