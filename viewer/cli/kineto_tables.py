"""The Kineto (torch.profiler) part of ``ringscope summarize``'s tables."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from viewer.units import fmt_bytes, fmt_ns


def print_tables(data: dict, top: int = 10, console=None) -> None:
    """Rich tables of the ``kineto`` block."""
    con = console or Console()
    ns = lambda v: "–" if v is None else fmt_ns(v)  # noqa: E731
    pct = lambda v: "–" if v is None else f"{v:.2f} %"  # noqa: E731
    num = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731

    def table(title, cols, rows):
        if not rows:
            return
        t = Table(title=title, title_justify="left")
        for c in cols:
            t.add_column(c, justify="right")
        for r in rows:
            t.add_row(*r)
        con.print(t)

    ov = {r["rank"]: r for r in data["overlap"]}
    table("GPU time per rank (HTA's temporal breakdown and overlap)",
          ("rank", "kernel time", "compute", "non-compute", "idle", "comm", "comm overlapped"),
          [(str(r["rank"]), ns(r["kernel_time_ns"]), pct(r["compute_pct"]), pct(r["non_compute_pct"]),
            pct(r["idle_pct"]), ns(r["communication_ns"]), pct(ov.get(r["rank"], {}).get("overlap_pct")))
           for r in data["temporal_breakdown"]])
    table("Collectives (nccl-tests conventions, GB/s)",
          ("op", "dtype", "size", "ranks", "count", "time µs", "algbw", "busbw", "busbw max"),
          [(r["op"], r["dtype"], "?" if r["bytes"] is None else fmt_bytes(r["bytes"]), str(r["n"]), str(r["count"]),
            f"{r['time_us']:.1f}", num(r["algbw_gbps"]), num(r["busbw_gbps"]), num(r["busbw_max_gbps"]))
           for r in data["collectives"][:top]])
    table("Per step (ProfilerStep#N)",
          ("rank", "step", "step", "GPU busy", "compute", "comm", "exposed comm", "GPU idle", "collectives"),
          [(str(r["rank"]), str(r["step"]), ns(r["step_ns"]), ns(r["gpu_busy_ns"]), ns(r["compute_ns"]),
            ns(r["communication_ns"]), ns(r["exposed_comm_ns"]), ns(r["gpu_idle_ns"]), str(r["collectives"]))
           for r in data["steps"][:top]])
    table("Who launches collectives last (clock-corrected)",
          ("rank", "collectives", "last", "% last", "wait imposed", "median lateness", "clock offset", "±"),
          [(str(r["rank"]), str(r["negotiations"]), str(r["times_last"]), f"{r['pct_last']:.0f}",
            ns(r["wait_imposed_ns"]), ns(r["median_lateness_ns"]), ns(r["clock_offset_ns"]),
            ns(r["clock_offset_uncertainty_ns"])) for r in data["rank_stragglers"]])
