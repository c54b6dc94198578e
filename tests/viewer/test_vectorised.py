"""The vectorised paths of the loader and analyses give what the plain per-item definitions give."""
from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from tests.viewer.conftest import SAMPLES
from viewer import Run, frames
from viewer.analyses import breakdown, intervals, stragglers


def _sample(scenario):
    d = SAMPLES / scenario
    if not d.is_dir() or not any(f.name.endswith((".json", ".json.gz")) for f in d.iterdir()):
        pytest.skip(f"sample_traces/{scenario} is empty: run `bash sample_traces/regenerate.sh {scenario}`")
    return d


def test_union_lengths_matches_the_interval_walk():
    rng = random.Random(7)
    for _ in range(400):
        n, groups = rng.randint(0, 40), rng.randint(1, 6)
        g = [rng.randrange(groups) for _ in range(n)]
        s = [rng.randint(-10**12, 10**12) if rng.random() < 0.1 else rng.randint(0, 500) for _ in range(n)]
        e = [x + rng.randint(-20, 300) for x in s]
        got = intervals.union_lengths(g, s, e, groups)
        want = [intervals.length([(a, b) for k, a, b in zip(g, s, e) if k == grp]) for grp in range(groups)]
        assert got.tolist() == want


def test_rank_stragglers_match_each_ranks_own_rows():
    """One groupby gives each rank what its own negotiation rows give; a rank with none gets zeros."""
    run = Run.load(_sample("straggler"), cache=False)
    neg = run.negotiations()
    got = stragglers.rank_stragglers(neg, size=run.size + 1).set_index("rank")
    assert sorted(got.index) == list(range(run.size + 1))
    for r in range(run.size + 1):
        mine = neg[neg["rank"] == r]
        last = mine[mine["is_last"]]
        row = got.loc[r]
        assert (row["negotiations"], row["times_last"]) == (len(mine), len(last))
        assert row["wait_imposed_ns"] == intervals.length(zip(last["ready_ns"] - last["wait_imposed_ns"],
                                                              last["ready_ns"]))
        assert row["median_lateness_ns"] == (float(mine["lateness_ns"].median()) if len(mine) else 0.0)
        assert row["p90_lateness_ns"] == (float(mine["lateness_ns"].quantile(0.9)) if len(mine) else 0.0)
    assert got.loc[run.size, "negotiations"] == 0 and got["times_last"].sum() == neg["is_last"].sum()


@pytest.mark.parametrize("scenario", ["straggler", "hang"])
def test_breakdown_in_batches_of_ranks_is_the_whole_runs(scenario, monkeypatch):
    """A rank at a time, two, or all at once: the same table (every figure is per rank and step)."""
    run = Run.load(_sample(scenario), cache=False)
    whole = breakdown.step_breakdown(run.tables)
    n_ops = len(run.tensor_ops)
    for limit in (1, n_ops // 2):
        monkeypatch.setattr(breakdown, "BATCH_OPS", limit)
        pd.testing.assert_frame_equal(breakdown.step_breakdown(run.tables), whole)
    assert len(whole) and whole["comm_ns"].gt(0).any() and whole["framework_wait_ns"].gt(0).any()


@pytest.mark.parametrize("scenario", ["straggler", "hang"])
def test_breakdown_matches_per_step_intervals(scenario):
    """Each (rank, step) row equals the union/intersection walk over that step's spans."""
    run = Run.load(_sample(scenario), cache=False)
    bd = run.breakdown_steps()
    ops, ev = run.tensor_ops, run.events
    assert len(bd) and len(bd) == len(ops.groupby(["rank", "step"]))
    syncs = ev[(ev["thread"] == "framework") & (ev["name"] == "SYNCHRONIZE")]
    for row in bd.itertuples(index=False):
        o = ops[(ops["rank"] == row.rank) & (ops["step"] == row.step)]
        done = o["done_ns"].fillna(o["start_ns"]).fillna(o["negotiated_ns"]).fillna(o["submit_ns"])
        flight = list(zip(o["submit_ns"].astype("int64"), done.astype("int64")))
        sy = syncs[(syncs["rank"] == row.rank) & (syncs["step"] == row.step)]
        wait = list(zip(sy["t_ns"], sy["t_ns"] + sy["dur_ns"]))
        assert row.in_flight_ns == intervals.length(flight)
        assert row.framework_wait_ns == intervals.length(wait)
        assert row.exposed_ns == intervals.intersection_length(flight, wait)
        assert row.overlapped_ns == row.in_flight_ns - row.exposed_ns


def test_events_merged_in_time_then_rank_order():
    """The column-by-column merge of the ranks' events equals concatenating and sorting the frames."""
    from viewer.loader import find_traces, parse_one

    d = _sample("healthy")
    run = Run.load(d, cache=False)
    parts = []
    for f in find_traces(d):
        p = parse_one(f)
        parts.append(p["events"].assign(t_ns=p["events"]["t_ns"] + (p["rank_info"]["base_epoch_ns"]
                                                                     - run.meta["origin_epoch_ns"]
                                                                     - (p["rank_info"]["clock_offset_ns"] or 0))))
    want = pd.concat(parts, ignore_index=True).sort_values(["t_ns", "rank"], kind="stable", ignore_index=True)
    assert run.events["rank"].nunique() == 4
    pd.testing.assert_frame_equal(run.events, frames.conform("events", want))
    assert (np.diff(run.events["t_ns"].to_numpy()) >= 0).all()


def test_analyses_memoised_across_spellings():
    run = Run.load(_sample("healthy"), cache=False)
    assert run.op_bandwidth() is run.op_bandwidth(None) is run.op_bandwidth(peak_busbw_gbps=None)
    assert run.op_bandwidth(5.0) is not run.op_bandwidth()
