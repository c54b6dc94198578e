"""A Kineto run of many ranks made by ``bench/tracegen.py`` from the real ranks of ../shared/kineto_traces: each
copy is read as the rank it was given, with its source rank's per-rank answers."""
from __future__ import annotations

import pytest

from bench import tracegen
from tests.viewer.conftest import ROOT

SOURCE = ROOT.parent / "shared" / "kineto_traces" / "pair_128rank_job"
PER_RANK = ("kineto_temporal", "kineto_overlap", "kineto_launch_stats", "kineto_streams", "kineto_steps")


def test_eight_copies_of_two_real_ranks_answer_as_their_sources(tmp_path, monkeypatch):
    if not SOURCE.exists():
        pytest.skip(f"real Kineto traces not present at {SOURCE} (../shared is absent)")
    from viewer.kineto import per_rank
    from viewer.run import Run

    monkeypatch.setattr(per_rank, "BATCH_EVENTS", 12_000)   # the analyses take 2 ranks at a time

    got = tracegen.build(SOURCE, tmp_path / "run", 8, 0)
    assert got["files"] == 8 and got["source_ranks"] == 2
    run, src = Run.load(tmp_path / "run", cache=False), Run.load(SOURCE, cache=False)
    assert run.ranks["rank"].tolist() == list(range(8)) and run.size == 8
    assert run.ranks["pid"].nunique() == 8   # each copy's CPU process is its own
    for name in PER_RANK:
        mine, theirs = run.get(name), src.get(name)
        assert sorted(mine["rank"].unique()) == list(range(8)), name
        for r in range(8):
            a = mine[mine["rank"] == r].drop(columns="rank").reset_index(drop=True)
            b = theirs[theirs["rank"] == r % 2].drop(columns="rank").reset_index(drop=True)
            assert a.equals(b), f"{name}: rank {r} differs from its source rank {r % 2}"
