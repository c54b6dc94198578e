"""The Kineto analyses that answer rank by rank, run a few ranks at a time (up to ``BATCH_EVENTS`` events, or one
rank): their GPU work and launch intermediates are held for those ranks only, whatever the run's size; each
answer is the one the run's whole tables give (every one of them groups by rank)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from viewer.analyses import batches
from viewer.kineto import gpu_time, kernels, launches
from viewer.schema import RunTables

ANSWERS = ("temporal", "overlap", "streams", "steps", "kernel_launches", "launch_stats")
COLUMNS = ["rank", "thread", "name", "cat", "t_ns", "dur_ns", "step", "launch_ns"]   # the events' they read
# ranks taken together up to this many events: pandas' cost per call, paid per batch, stays small against the
# work (one rank at a time doubled the analyses' CPU at 64 ranks), and the batch's intermediates stay ~30 MB
BATCH_EVENTS = 1 << 18


def rank_tables(tables):
    """The ranks' tables, a batch of ranks at a time in rank order: their own ``events`` (the :data:`COLUMNS` the
    answers read) and ``fused_ops``, each rank's rows in the run's order; the run's ``ranks`` and ``meta`` (a
    rank's clock phase reads them). A run that fits one batch: its tables as they are."""
    ev_rank, fo_rank = tables.events["rank"].to_numpy(), tables.fused_ops["rank"].to_numpy()
    if len(ev_rank) <= BATCH_EVENTS or len(np.unique(ev_rank)) <= 1:
        yield tables
        return
    for ev_rows, fo_rows in batches.rank_batches([ev_rank, fo_rank], BATCH_EVENTS):
        ev = pd.DataFrame({c: tables.events[c].array.take(ev_rows) for c in COLUMNS}, copy=False)
        yield RunTables(events=ev, fused_ops=tables.fused_ops.iloc[fo_rows], tensor_ops=tables.tensor_ops,
                        readiness=tables.readiness, cycles=tables.cycles, ranks=tables.ranks, meta=tables.meta)


def answers(tables) -> dict[str, pd.DataFrame]:
    """``{name: table}`` for :data:`ANSWERS`, each the ranks' rows one after another."""
    pieces: dict[str, list] = {k: [] for k in ANSWERS}
    for t in rank_tables(tables):
        work, work_all_steps = kernels.gpu_work(t), kernels.gpu_work(t, include_last_step=True)
        kl = launches.kernel_launches(t, work)
        got = {"temporal": gpu_time.temporal_breakdown(work), "overlap": gpu_time.comm_comp_overlap(work),
               "streams": gpu_time.stream_table(work), "steps": gpu_time.step_breakdown(t, work_all_steps),
               "kernel_launches": kl, "launch_stats": launches.launch_stats(kl)}
        for k, df in got.items():
            pieces[k].append(df)
        del t, work, work_all_steps, kl, got
    return {k: _joined(v) for k, v in pieces.items()}


def _joined(dfs: list[pd.DataFrame]) -> pd.DataFrame:
    """The ranks' rows as one table; a rank with none adds nothing (its empty table has no column types)."""
    rows = [d for d in dfs if len(d)]
    if not rows:
        return dfs[0]
    return rows[0] if len(rows) == 1 else pd.concat(rows, ignore_index=True)
