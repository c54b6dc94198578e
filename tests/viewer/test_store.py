"""The run's store (viewer/cache.py): per-file Parquet and info, built once, safely, in parallel or not."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from tests.viewer import tracegen
from viewer import Run, cache
from viewer.errors import TraceError, UnreadableTraceWarning
from viewer.schema import TABLES

ROOT = Path(__file__).resolve().parents[2]


def _same(a: Run, b: Run) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), obj=name)
    assert a.meta == b.meta


def _load(d, **kw) -> tuple[Run, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = Run.load(d, **kw)
    return run, [str(w.message) for w in caught if issubclass(w.category, UnreadableTraceWarning)]


def test_an_entry_is_each_files_tables_and_info_beside_the_runs(tmp_path):
    paths = tracegen.write_run(tmp_path / "run", size=3, steps=2, offsets={1: 5_000_000})
    a = Run.load(tmp_path / "run", cache_dir=tmp_path / "store")
    (entry,) = (tmp_path / "store").iterdir()
    assert sorted(p.name for p in entry.iterdir()) == sorted(
        [f"rank-0000{i}.{t}.parquet" for i in range(3) for t in cache.TABLES]
        + [f"rank-0000{i}.json" for i in range(3)] + [f"run.{t}.parquet" for t in TABLES] + ["run.json"])
    run = json.loads((entry / "run.json").read_text())
    assert run["kept"] == [0, 1, 2] and set(run["shifts"]) == {str(p) for p in paths}
    assert run["meta"] == a.meta
    _same(a, Run.load(tmp_path / "run", cache_dir=tmp_path / "store"))   # from the store


def test_a_hit_reads_the_runs_tables_as_the_first_load_made_them(tmp_path, monkeypatch):
    """Categories no row uses, an empty table's and Kineto's extra column come back; the files are not read."""
    tracegen.write_run(tmp_path / "run", size=2, steps=2)
    first = Run.load(tmp_path / "run", cache_dir=tmp_path / "store")
    assert first.events["name"].cat.categories.is_monotonic_increasing
    (entry,) = (tmp_path / "store").iterdir()
    ev = first.events.assign(name=first.events["name"].cat.add_categories(["~UNUSED"]),
                             launch_ns=pd.array([None] * len(first.events), dtype="Int64"))
    tables = {t: getattr(first, t) for t in cache.RUN_TABLES} | {"events": ev,
                                                                  "cycles": first.cycles.iloc[:0]}
    run = json.loads((entry / "run.json").read_text())
    run["columns"] = cache.write_tables(entry, tables)
    (entry / "run.json").write_text(json.dumps(run))
    monkeypatch.setattr("viewer.parse.parse_one", lambda f: pytest.fail(f"{f} parsed again"))
    again = Run.load(tmp_path / "run", cache_dir=tmp_path / "store")
    for t, df in tables.items():
        pd.testing.assert_frame_equal(getattr(again, t), df, obj=t)


def test_workers_give_the_same_tables_with_and_without_the_store(tmp_path, monkeypatch):
    tracegen.write_run(tmp_path / "run", size=4, steps=3, offsets={2: -3_000_000})
    alone = Run.load(tmp_path / "run", cache=False)
    monkeypatch.setenv("RINGSCOPE_PARSE_WORKERS", "2")
    _same(alone, Run.load(tmp_path / "run", cache=False))
    _same(alone, Run.load(tmp_path / "run", cache_dir=tmp_path / "store"))   # built by the workers
    monkeypatch.setenv("RINGSCOPE_PARSE_WORKERS", "1")
    _same(alone, Run.load(tmp_path / "run", cache_dir=tmp_path / "store"))   # read back


def test_two_processes_building_one_store_at_once_leave_one_entry(tmp_path):
    tracegen.write_run(tmp_path / "run", size=4, steps=20)
    code = ("import sys; from viewer import Run; "
            "Run.load(sys.argv[1], cache_dir=sys.argv[2]).get('late_ranks')")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "run"), str(tmp_path / "store")],
                              cwd=ROOT, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0], [p.stderr.read() for p in procs]
    entries = list((tmp_path / "store").iterdir())
    assert len(entries) == 1 and ".tmp" not in entries[0].name
    _same(Run.load(tmp_path / "run", cache=False), Run.load(tmp_path / "run", cache_dir=tmp_path / "store"))


def test_an_entry_built_meanwhile_is_kept_and_the_late_build_dropped(tmp_path):
    paths = tracegen.write_run(tmp_path / "run", size=2, steps=2)
    Run.load(paths, cache_dir=tmp_path / "store")
    (entry,) = (tmp_path / "store").iterdir()
    late = cache.building(paths, cache_dir=tmp_path / "store")
    for p in entry.iterdir():
        shutil.copy(p, late / p.name)
    (late / "rank-00000.events.parquet").write_bytes(b"not parquet")   # would break the entry if it won
    cache.commit(late, paths, json.loads((entry / "run.json").read_text()), cache_dir=tmp_path / "store")
    assert list((tmp_path / "store").iterdir()) == [entry] and cache.load(paths, cache_dir=tmp_path / "store")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_bad_and_a_missing_rank_are_one_line_each_and_the_rest_analysed(tmp_path, monkeypatch, workers):
    monkeypatch.setenv("RINGSCOPE_PARSE_WORKERS", workers)
    d = tmp_path / "run"
    paths = tracegen.write_run(d, size=5, steps=2)
    head = paths[1].read_text().split("\n")[0]   # a trace's head, then no event the viewer reads
    paths[1].write_text(head + '\n"traceEvents": [\n{"ph": "s", "name": "x", "pid": 1, "tid": 1, "ts": 1, "id": 1}\n]}')
    paths[3].unlink()
    for kw in ({"cache": False}, {"cache_dir": tmp_path / "store"}, {"cache_dir": tmp_path / "store"}):
        run, said = _load(d, **kw)   # parsed, parsed into the store, read from it: the same lines
        assert run.ranks["rank"].tolist() == [0, 2, 4]
        assert said == [f"{paths[1]}: no trace events the viewer reads (X, B/E, i, C); left out, the other 3 "
                        "trace(s) analysed",
                        f"{d}: 2 of 5 ranks have no trace (rank 1, 3); the other 3 analysed"]


def test_a_run_with_no_readable_trace_is_an_error(tmp_path):
    paths = tracegen.write_run(tmp_path / "run", size=2, steps=1)
    for p in paths:
        p.write_text(p.read_text().split("\n")[0] + '\n"traceEvents": [\n{"ph": "s", "pid": 1, "ts": 1, "id": 1}\n]}')
    with pytest.raises(TraceError, match="rank-0.json: no trace events"):
        Run.load(tmp_path / "run", cache=False)


def test_a_hits_summary_reads_the_events_but_each_ops_rows_and_is_the_same(tmp_path, monkeypatch):
    """From the store, a ringscope run's summary reads its events without the "tensor" thread's rows (each op's,
    rebuilt from its tensor ops); ``events`` reads them whole, once."""
    from viewer.summary import build_summary

    tracegen.write_run(tmp_path / "run", size=3, steps=3)
    alone = Run.load(tmp_path / "run", cache=False)
    Run.load(tmp_path / "run", cache_dir=tmp_path / "store")
    reads, real = [], cache.read_table
    monkeypatch.setattr(cache, "read_table", lambda d, t, spec, filters=None: reads.append((t, filters)) or real(
        d, t, spec, filters))
    hit = Run.load(tmp_path / "run", cache_dir=tmp_path / "store")
    assert json.dumps(build_summary(hit)) == json.dumps(build_summary(alone))
    assert [f for t, f in reads if t == "events"] == [[("thread", "!=", "tensor")]]
    assert 0 < len(hit.tables.events_without_ops) < len(alone.events)
    pd.testing.assert_frame_equal(hit.events, alone.events)
    assert hit.tables.events_without_ops is hit.events and len([t for t, _ in reads if t == "events"]) == 2


def test_a_kineto_hits_summary_reads_its_events_once(tmp_path, monkeypatch):
    """A Kineto run has no op rows to leave out: its events are read from the store once, whole (not the part,
    then the whole again beside it)."""
    from viewer.summary import build_summary

    src = ROOT.parent / "shared" / "kineto_traces" / "pair_128rank_job"
    if not src.exists():
        pytest.skip(f"real Kineto traces not present at {src} (../shared is absent)")
    alone = Run.load(src, cache=False)
    Run.load(src, cache_dir=tmp_path / "store")
    reads, real = [], cache.read_table
    monkeypatch.setattr(cache, "read_table", lambda d, t, spec, filters=None: reads.append((t, filters)) or real(
        d, t, spec, filters))
    hit = Run.load(src, cache_dir=tmp_path / "store")
    assert json.dumps(build_summary(hit)) == json.dumps(build_summary(alone))
    assert [f for t, f in reads if t == "events"] == [None]
    assert hit.tables.events_without_ops is hit.events


def test_an_entry_whose_events_file_is_gone_is_a_miss_not_an_error_later(tmp_path):
    paths = tracegen.write_run(tmp_path / "run", size=2, steps=2)
    Run.load(tmp_path / "run", cache_dir=tmp_path / "store")
    (entry,) = (tmp_path / "store").iterdir()
    (entry / "run.events.parquet").unlink()
    assert cache.load(paths, cache_dir=tmp_path / "store") is None
