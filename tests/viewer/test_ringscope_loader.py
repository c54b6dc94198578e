"""Loader unit tests on hand-written traces in the documented format (tests/viewer/tracegen.py)."""
from __future__ import annotations

import os
import time

from tests.viewer import tracegen
from viewer import Run, cache
from viewer.cache import cache_root
from viewer.schema import TABLES


def test_tables_follow_schema(tmp_path):
    tracegen.write_run(tmp_path / "run", size=3, steps=2)
    run = Run.load(tmp_path / "run", cache=False)
    for name, cols in TABLES.items():
        df = getattr(run, name)
        assert list(df.columns)[: len(cols)] == list(cols)
        assert all(str(df[c].dtype) == t for c, t in cols.items()), name
    for c in ("thread", "name", "cat", "ph", "tensor"):   # categories: the values used, sorted as text
        cats = run.events[c].cat.categories.tolist()
        assert cats == sorted(set(run.events[c].dropna())), c
    assert run.ranks["rank"].tolist() == [0, 1, 2]
    assert len(run.tensor_ops) == 3 * 2 * 2 and run.tensor_ops["done_ns"].notna().all()
    assert set(run.fused_ops["count"]) == {2} and (run.fused_ops["memcpy_in_ns"] > 0).all()
    assert len(run.readiness) == 2 * 2 * 3 and (run.readiness["source"] == "ringscope").all()
    assert len(run.cycles) == 3 * 2
    # nested async phases sit at depth 1 under the tensor lifecycle
    neg = run.events[run.events["name"] == "NEGOTIATE_ALLREDUCE"]
    assert (neg["depth"] == 1).all() and (neg["thread"] == "tensor").all()


def test_clock_offsets_line_ranks_up(tmp_path):
    # same true instants on every rank, recorded on clocks that are off by +5 ms and -3 ms
    tracegen.write_run(tmp_path / "run", size=3, steps=2, offsets={1: 5_000_000, 2: -3_000_000})
    run = Run.load(tmp_path / "run", cache=False)
    fo = run.fused_ops
    starts = fo.groupby("response")["start_ns"].nunique()
    assert (starts == 1).all()
    assert run.ranks.set_index("rank").loc[1, "clock_offset_ns"] == 5_000_000


def test_array_form_and_gzip(tmp_path):
    d = tmp_path / "run"
    tracegen.write_run(d, size=2, steps=2, gz=True)
    run = Run.load(d, cache=False)
    assert len(run.tensor_ops) == 8
    arr = tmp_path / "arr.json"
    ev = tracegen.rank_events(0, 1, steps=1)
    import json
    arr.write_text("[\n" + ",\n".join(json.dumps(e) for e in ev) + "\n]")
    run = Run.load(arr, cache=False)
    assert len(run.tensor_ops) == 2 and run.ranks["rank"].tolist() == [0]


def test_cache_hit_and_invalidation(tmp_path, monkeypatch):
    import pandas as pd

    monkeypatch.delenv("RINGSCOPE_CACHE_DIR", raising=False)
    d = tmp_path / "run"
    paths = tracegen.write_run(d, size=2, steps=3)
    a = Run.load(d)
    root = cache_root(paths[0])
    assert root == d / ".ringscope-cache" and len(list(root.iterdir())) == 1   # one entry: the run
    assert cache.load(paths) is not None   # a hit
    b = Run.load(d)
    for name in TABLES:   # the same tables, dtypes and all
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), obj=name)
    assert a.meta == b.meta
    # a changed file (new size/mtime) is parsed again, not served stale
    tracegen.write_run(d, size=2, steps=4)
    os.utime(paths[0], ns=(time.time_ns(), time.time_ns() + 10**9))
    c = Run.load(d)
    assert len(c.tensor_ops) == 2 * 4 * 2
    assert len(list(root.iterdir())) == 1  # the stale entry replaced
    # another set of files (one rank alone) is an entry of its own
    assert len(Run.load(paths[0]).ranks) == 1 and len(list(root.iterdir())) == 2


def test_a_cache_hit_gives_the_first_loads_warnings_again(tmp_path):
    import warnings

    from viewer.errors import TruncatedTraceWarning

    d = tmp_path / "run"
    tracegen.write_run(d, size=2, steps=2)
    tracegen.write_rank(d / "rank-1.json", 1, 2, tracegen.rank_events(1, 2, steps=2), close=False, shutdown=False)
    seen = []
    for _ in range(2):   # parsed, then from the cache
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run = Run.load(d)
        seen.append([(w.category, str(w.message)) for w in caught])
    assert seen[0] == seen[1] and seen[0][0][0] is TruncatedTraceWarning and "rank-1.json" in seen[0][0][1]
    assert run.ranks["truncated"].tolist() == [False, True]


def test_cache_dir_option(tmp_path):
    d = tmp_path / "run"
    tracegen.write_run(d, size=1, steps=1)
    Run.load(d, cache_dir=tmp_path / "elsewhere")
    assert any((tmp_path / "elsewhere").iterdir())


def test_a_meta_json_would_change_is_not_stored(tmp_path, monkeypatch):
    from viewer.ringscope import tables

    paths = tracegen.write_run(tmp_path / "run", size=1, steps=1)
    parse = tables.parse_file
    monkeypatch.setattr(tables, "parse_file", lambda p: {**(q := parse(p)), "meta": {**q["meta"], "t": (0,)}})
    Run.load(paths, cache_dir=tmp_path / "cache")   # JSON gives a list back: no entry
    assert cache.load(paths, cache_dir=tmp_path / "cache") is None and not any((tmp_path / "cache").iterdir())
    monkeypatch.setattr(tables, "parse_file", parse)
    a = Run.load(paths, cache_dir=tmp_path / "cache")
    assert cache.load(paths, cache_dir=tmp_path / "cache") is not None
    assert Run.load(paths, cache_dir=tmp_path / "cache").meta == a.meta


def test_warnings_before_a_failed_load_are_still_given(tmp_path):
    import pytest

    from viewer.errors import TraceError, TruncatedTraceWarning

    d = tmp_path / "run"
    d.mkdir()
    tracegen.write_rank(d / "rank-0.json", 0, 1, tracegen.rank_events(0, 1, steps=1), close=False, shutdown=False)
    tracegen.write_rank(d / "rank-0-again.json", 0, 1, tracegen.rank_events(0, 1, steps=1))
    with pytest.warns(TruncatedTraceWarning, match="rank-0.json"), pytest.raises(TraceError, match="also comes"):
        Run.load(d)



def test_each_ranks_cpus_reach_the_ranks_table(tmp_path):
    """Which CPUs each rank could use (bound ranks: one core each) stay per rank; a set that is not
    a list of ids is unknown, not a crash."""
    sets = [[0], [1], [0, 1, 2], "0-3"]
    for r, cs in enumerate(sets):
        tracegen.write_rank(tmp_path / f"rank-{r}.json", r, 4, tracegen.rank_events(r, 4, steps=1),
                            meta={"cpus": 1, "cpu_set": cs})
    run = Run.load(tmp_path, cache=False)
    assert run.tables.ranks["cpu_set"].tolist()[:3] == ["0", "1", "0,1,2"]
    assert run.tables.ranks["cpu_set"].isna().tolist() == [False] * 3 + [True]
    assert "cpu_set" not in run.meta
