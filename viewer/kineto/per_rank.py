"""The Kineto analyses that answer rank by rank, run one rank at a time: only one rank's GPU work and launch
intermediates are held at once, whatever the run's size; each answer is the one the run's whole tables give
(every one of them groups by rank)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from viewer.kineto import gpu_time, kernels, launches
from viewer.schema import RunTables

ANSWERS = ("temporal", "overlap", "streams", "steps", "kernel_launches", "launch_stats")


def rank_tables(tables):
    """Each rank's tables in rank order: its own ``events`` and ``fused_ops`` (rows in the run's order), the
    run's ``ranks`` and ``meta`` (a rank's clock phase reads them); a run of one rank: its tables as they are."""
    ev_rank, fo_rank = tables.events["rank"].to_numpy(), tables.fused_ops["rank"].to_numpy()
    ranks = np.unique(ev_rank)
    if len(ranks) <= 1:
        yield tables
        return
    for r in ranks:
        ev = tables.events.take(np.flatnonzero(ev_rank == r))
        ev.index = pd.RangeIndex(len(ev))
        yield RunTables(events=ev, fused_ops=tables.fused_ops[fo_rank == r], tensor_ops=tables.tensor_ops,
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
