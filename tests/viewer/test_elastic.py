"""Elastic runs (docs/ELASTIC.md): every generation loads as one run, recoveries are costed and checked
against the ranks' ELASTIC_RESET slices, the summary reports them, bad manifests get one line."""
from __future__ import annotations

import json
import shutil
import warnings

import pytest

from tests.viewer.elastic_runs import write_elastic_run
from viewer.run import Run, Unavailable


@pytest.fixture(scope="module")
def lost_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("elastic") / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        manifest = write_elastic_run(out)
    return out, manifest


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Run.load(path, **kw)


def test_generations_load_as_one_run_on_one_axis(lost_run):
    path, manifest = lost_run
    run = _load(path, cache=False)
    ranks = run.ranks
    assert sorted(zip(ranks["rank"], ranks["generation"])) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0)]
    assert run.meta["ranks_loaded"] == [0, 1, 2, 3]
    assert run.size == 3   # the smallest world: a step's collective is complete with 3 ranks
    # the second world's events sit after the first's, at their wall-clock distance
    ev = run.events
    gens = manifest["generations"]
    origin = run.meta["origin_epoch_ns"]
    reset = ev[ev["name"] == "ELASTIC_RESET"]
    assert sorted(reset["rank"]) == [0, 1, 2]
    first = int(reset["t_ns"].min())
    assert origin == gens[0]["start_epoch_ns"]   # time 0: the driver's first launch
    assert abs(first - (manifest["resets"][0]["relaunched_epoch_ns"] + 1_000_000_000 - origin)) < 1_000_000
    assert int(ev[ev["rank"] == 3]["t_ns"].max()) < first
    # only the last world's cut traces count as truncated; each generation keeps its own list
    assert run.meta["truncated_ranks"] == []
    assert [g["truncated_ranks"] for g in run.meta["elastic"]["generations"]] == [[0, 1, 2, 3], []]
    assert not (run.findings()["kind"].isin(["rank_died", "hang", "truncated"])).any()


def test_redone_steps_count_once_from_the_later_world(lost_run):
    path, _ = lost_run
    run = _load(path, cache=False)
    bd = run.breakdown_steps()
    bd = bd[bd["step"] >= 0]
    assert not bd.duplicated(["rank", "step"]).any()
    # steps 4 and 5 ran in both worlds (after the commit at step 3): the second world's 30 ms copy counts
    for step in (4, 5):
        assert set(bd[bd["step"] == step]["rank"]) == {0, 1, 2}
        assert (bd[bd["step"] == step]["step_ns"] == 30_000_000).all()
    assert sorted(bd[bd["rank"] == 3]["step"]) == [0, 1, 2, 3]
    assert sorted(bd[bd["rank"] == 0]["step"]) == list(range(12))
    neg = run.negotiations()
    assert sorted(neg["step"].unique()) == list(range(12))
    assert (neg.groupby(["tensor", "step"])["rank"].nunique().loc[lambda s: s.index.get_level_values(1) >= 4]
            == 3).all()
    assert not run.hangs().shape[0]
    # the redone copies stay on the timeline, out of the step analyses (step -1)
    ev = run.events
    step_spans = ev[(ev["name"] == "STEP") & (ev["rank"] == 0)]
    assert len(step_spans) == 14 and (step_spans["step"] == -1).sum() == 2


def test_recoveries_cost_each_part(lost_run):
    path, manifest = lost_run
    run = _load(path, cache=False)
    rec = run.recoveries()
    assert len(rec) == 1
    row = rec.iloc[0]
    exp = manifest["expected"][0]
    for k in ("detect_ms", "reform_ms", "restore_ms", "first_step_ms", "lost_ms", "redone_ms"):
        assert row[k] == pytest.approx(exp[k], abs=0.01), k
    assert exp["lost_ms"] == pytest.approx(exp["detect_ms"] + exp["reform_ms"] + exp["restore_ms"]
                                           + exp["first_step_ms"])
    assert row["kind"] == "lost" and (row["size_before"], row["size_after"]) == (4, 3)
    assert "rank 2" in row["cause"] and "signal 9" in row["cause"] and row["lost"].startswith("rank 2")
    assert row["last_commit_step"] == 3
    g = manifest["generations"]
    wall = g[-1]["end_epoch_ns"] - g[0]["start_epoch_ns"]
    assert row["share_pct"] == pytest.approx(100 * (exp["lost_ms"] + exp["redone_ms"]) * 1e6 / wall)
    assert row["biggest"] == "re-forming the world"
    assert row["ranks_with_slice"] == [0, 1, 2] and row["ranks_missing_slice"] == []
    f = run.findings()
    msg = f[f["kind"] == "recoveries"]["message"].iloc[0]
    assert "re-forming the world" in msg and "start-up" in msg and f"{row['share_pct']:.0f} %" in msg


def test_rank_without_reset_slice_is_reported(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_elastic_run(tmp_path / "run", no_reset_slice=((1, 2),))
    rec = _load(tmp_path / "run", cache=False).recoveries()
    assert rec.iloc[0]["ranks_with_slice"] == [0, 1] and rec.iloc[0]["ranks_missing_slice"] == [2]


def test_lost_then_added_two_rows_and_redone_work_advice(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = write_elastic_run(tmp_path / "run", worlds=((4, 7), (3, 4), (4, 4)), kinds=("lost", "added"),
                              step_ms=(40.0, 40.0, 40.0), commit_every=4, fail_after_ms=30.0, detect_ms=1.0,
                              relaunch_ms=1.0, start_ms=5.0, register_ms=1.0, restore_ms=1.0)
    run = _load(tmp_path / "run", cache=False)
    rec = run.recoveries()
    assert list(rec["kind"]) == ["lost", "added"]
    assert list(zip(rec["size_before"], rec["size_after"])) == [(4, 3), (3, 4)]
    assert rec.iloc[1]["redone_ms"] == 0 and "h2" in rec.iloc[1]["added"]
    assert rec.iloc[0]["redone_ms"] == pytest.approx(m["expected"][0]["redone_ms"])
    assert rec.iloc[0]["biggest"] == "work redone"
    assert run.size == 3
    bd = run.breakdown_steps()
    bd = bd[bd["step"] >= 0]
    assert not bd.duplicated(["rank", "step"]).any()
    assert sorted(bd[bd["rank"] == 3]["step"]) == [0, 1, 2, 3, 8, 9, 10, 11]
    msg = run.findings().set_index("kind").loc["recoveries", "message"]
    assert "2 recoveries (1 added, 1 lost)" in msg and "commit more often" in msg


def test_cheap_recovery_no_finding(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_elastic_run(tmp_path / "run", worlds=((4, 6), (3, 80)), commit_every=2, fail_after_ms=5.0,
                          detect_ms=5.0, relaunch_ms=5.0, start_ms=5.0, register_ms=5.0, restore_ms=5.0)
    run = _load(tmp_path / "run", cache=False)
    rec = run.recoveries()
    assert len(rec) == 1 and 0 < rec.iloc[0]["share_pct"] < 5
    assert "recoveries" not in set(run.findings()["kind"])


def test_cache_keys_on_every_generation(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_elastic_run(tmp_path / "a")
        write_elastic_run(tmp_path / "b", step_ms=(40.0, 20.0))
    first = _load(tmp_path / "a")
    again = _load(tmp_path / "a")   # from the cache
    assert first.breakdown_steps().equals(again.breakdown_steps()) and first.recoveries().equals(again.recoveries())
    # a new second generation (same paths, other contents) is parsed again, not served from the cache
    shutil.rmtree(tmp_path / "a" / "gen-001")
    shutil.copytree(tmp_path / "b" / "gen-001", tmp_path / "a" / "gen-001")
    shutil.copy(tmp_path / "b" / "elastic.json", tmp_path / "a" / "elastic.json")
    bd = _load(tmp_path / "a").breakdown_steps()
    assert (bd[(bd["step"] >= 4) & (bd["rank"] == 0)]["step_ns"] == 20_000_000).all()


def test_summarize_json_csv_and_table(lost_run, tmp_path, capsys):
    from viewer.cli.summarize import main

    path, _ = lost_run
    assert main([str(path), "--json", "--csv", str(tmp_path / "csv")]) == 0
    data = json.loads(capsys.readouterr().out)
    rec = data["recoveries"]
    assert len(rec) == 1 and rec[0]["kind"] == "lost" and rec[0]["reform_ms"] == pytest.approx(1140.0)
    assert [g["size"] for g in data["run"]["generations"]] == [4, 3]
    assert data["findings"][0]["kind"] == "recoveries"
    import pandas as pd

    csv = pd.read_csv(tmp_path / "csv" / "recoveries.csv")
    assert len(csv) == 1 and csv.loc[0, "redone_ms"] == pytest.approx(90.0)
    assert main([str(path), "--full"]) == 0
    out = capsys.readouterr().out
    assert "Recoveries" in out and "4→3" in out and "killed by signal 9" in out and "generation 1" in out


def test_plain_run_has_no_recoveries():
    from tests.viewer.conftest import SAMPLES

    run = _load(SAMPLES / "healthy", cache=False)
    assert run.why_not("recoveries") == "needs an elastic run (elastic.json and its generations)"
    assert run.ranks["generation"].isna().all() and "elastic" not in run.meta
    with pytest.raises(Unavailable, match="recoveries: needs an elastic run"):
        run.recoveries()


def _broken(tmp_path, lost_run):
    dst = tmp_path / "run"
    shutil.copytree(lost_run[0], dst, ignore=shutil.ignore_patterns(".ringscope-cache"))
    return dst


@pytest.mark.parametrize("damage, where, words", [
    (lambda d: (d / "elastic.json").write_text('{"elastic_format": 1, "generations": ['), "elastic.json",
     "not valid JSON"),
    (lambda d: (d / "elastic.json").write_text('{"elastic_format": 7}'), "elastic.json", "elastic_format"),
    (lambda d: (d / "elastic.json").write_text(json.dumps(
        {**json.loads((d / "elastic.json").read_text()), "resets": [{"kind": "lost"}]})), "elastic.json",
     "generation_before"),
    (lambda d: (d / "elastic.json").write_text(json.dumps(
        {**json.loads((d / "elastic.json").read_text()), "generations": "x"})), "elastic.json", "generations"),
    (lambda d: shutil.rmtree(d / "gen-001"), "gen-001", "directory is missing"),
    (lambda d: [f.unlink() for f in (d / "gen-001").iterdir()], "gen-001", "holds no trace files"),
])
def test_bad_elastic_dir_one_line(tmp_path, lost_run, capsys, damage, where, words):
    from viewer.cli.summarize import main

    d = _broken(tmp_path, lost_run)
    damage(d)
    assert main([str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"ringscope: {d / where}:") and words in err[0], err


def test_unlisted_generation_is_reported(tmp_path, lost_run):
    from viewer.ringscope.elastic import ElasticWarning

    d = _broken(tmp_path, lost_run)
    shutil.copytree(d / "gen-001", d / "gen-002")
    with pytest.warns(ElasticWarning, match="gen-002: not listed"):
        run = Run.load(d, cache=False)
    assert sorted(run.ranks["generation"].dropna().unique()) == [0, 1]


def test_merge_one_trace_across_generations(lost_run, tmp_path):
    from viewer.cli.merge import main

    path, manifest = lost_run
    out = tmp_path / "merged.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main([str(path), "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    head = data["otherData"]["ringscope_merged"]
    assert sorted((r["rank"], r["generation"]) for r in head["ranks"]) == \
        [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0)]
    assert head["elastic"]["resets"][0]["kind"] == "lost"
    ev = data["traceEvents"]
    origin = head["origin_epoch_ns"]
    steps0 = [e for e in ev if e.get("pid") == 0 and e.get("name") == "STEP"]
    assert len(steps0) == 14   # both worlds' steps of rank 0 in one process
    gen1_start_us = (manifest["generations"][1]["start_epoch_ns"] - origin) / 1000
    assert sum(e["ts"] >= gen1_start_us for e in steps0) == 8
    # the later world's tensor threads are its own (numbered anew there), named
    tensor_tids = {e["tid"] for e in ev if e.get("pid") == 0 and e.get("cat") == "tensor"}
    assert any(t < 100_000 for t in tensor_tids) and any(t > 100_000 for t in tensor_tids)
    named = {e["tid"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") == 0}
    assert tensor_tids <= named
    driver = [e for e in ev if e.get("pid") == 1 << 30 and e.get("ph") == "X"]
    reset = [e for e in driver if e["name"].startswith("ELASTIC_RESET")]
    assert len(reset) == 1 and "killed by signal 9" in reset[0]["name"]
    exp = manifest["expected"][0]
    assert reset[0]["dur"] == pytest.approx(exp["lost_ms"] * 1000, abs=1)
    assert {e["name"] for e in driver} >= {"detection", "re-forming the world", "restoring the state",
                                             "the first step after", "work redone (since the last commit)"}
    # every rank row is one process: no second process_name per rank
    names = [e["pid"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"]
    assert len(names) == len(set(names))


def test_a_stopped_worlds_unclosed_traces_are_one_line(lost_run):
    from viewer.errors import TruncatedTraceWarning
    from viewer.ringscope.elastic import ElasticWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Run.load(lost_run[0], cache=False)
    assert not [w for w in caught if issubclass(w.category, TruncatedTraceWarning)]
    lines = [str(w.message) for w in caught if issubclass(w.category, ElasticWarning)]
    assert len(lines) == 1 and "gen-000: 4 trace(s) unclosed, as expected" in lines[0] and "failure" in lines[0]


def test_a_stopped_worlds_rank_without_events_is_reported_and_left_out(tmp_path, lost_run):
    from viewer.ringscope.elastic import ElasticWarning

    d = _broken(tmp_path, lost_run)
    f = d / "gen-000" / "rank-00003.json"
    head = f.read_text().split("\n")[:3]   # killed before its first flush: header and process name only
    f.write_text("\n".join(head) + "\n")
    with pytest.warns(ElasticWarning, match="rank-00003.json: no trace events: the driver stopped generation 0"):
        run = Run.load(d, cache=False)
    assert sorted(run.ranks["rank"][run.ranks["generation"] == 0]) == [0, 1, 2]
    # the same in the last world (not stopped by the driver) is the usual one-line error
    g = d / "gen-001" / "rank-00001.json"
    g.write_text("\n".join(g.read_text().split("\n")[:3]) + "\n")
    from viewer.errors import TraceError

    with pytest.raises(TraceError, match="rank-00001.json: no trace events"):
        _load(d, cache=False)


def check_elastic_run(path, tmp_path):
    """What must hold of any elastic run the runtime's driver wrote (a real one: sample_traces/elastic)."""
    from viewer.cli.merge import main as merge_main
    from viewer.cli.summarize import main as summarize_main

    m = json.loads((path / "elastic.json").read_text())
    run = _load(path, cache=False)
    for g in m["generations"]:
        ranks = set(run.ranks.loc[run.ranks["generation"] == g["generation"], "rank"])
        assert ranks and ranks <= set(range(g["size"])), (g, ranks)
    rec = run.recoveries()
    assert len(rec) == len(m["resets"])
    for r in rec.to_dict("records"):
        parts = [r[c] for c in ("detect_ms", "reform_ms", "restore_ms", "first_step_ms")]
        assert all(p is not None and p >= 0 for p in parts), r
        assert r["lost_ms"] == pytest.approx(sum(parts), abs=0.01) and 0 < r["share_pct"] < 100
        assert r["ranks_missing_slice"] == [] and r["ranks_with_slice"], r   # the runtime writes it everywhere
    bd = run.breakdown_steps()
    assert not bd[bd["step"] >= 0].duplicated(["rank", "step"]).any()
    assert not set(run.findings()["kind"]) & {"rank_died", "hang"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert summarize_main([str(path), "--json", "--no-cache"]) == 0
        assert merge_main([str(path), "-o", str(tmp_path / "merged.json")]) == 0
    return run, rec


def test_sample_elastic_run(tmp_path, capsys):
    from tests.viewer.conftest import SAMPLES

    if not (SAMPLES / "elastic" / "elastic.json").is_file():
        pytest.skip("sample_traces/elastic is absent (a real elastic run made by the runtime stream)")
    check_elastic_run(SAMPLES / "elastic", tmp_path)


def test_fixture_meets_what_a_real_run_must(lost_run, tmp_path, capsys):
    check_elastic_run(lost_run[0], tmp_path)


def test_merged_elastic_run_opens_cleanly_in_perfetto(lost_run, tmp_path):
    """The merged trace of an elastic run loads in the real Perfetto UI with no import error or data loss,
    and its trace processor holds the reset slice on the driver's lane."""
    from tests.tracer.perfetto_util import chromium_missing_reason, perfetto
    from tests.viewer.test_merge import _check_nesting
    from viewer.merge import plan_merge, write_merged

    reason = chromium_missing_reason()
    if reason:
        pytest.skip(f"Perfetto check needs a browser: {reason}")
    out = tmp_path / "merged.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_merged(plan_merge(lost_run[0]), out)
    _check_nesting(json.loads(out.read_text())["traceEvents"])
    with perfetto(out, screenshot=tmp_path / "merged.png") as ui:
        assert ui.problems == [], f"Perfetto import problems: {ui.problems}"
        rows = ui.query("select name, dur from slice where name like 'ELASTIC_RESET lost%'", ["name", "dur"])
    assert len(rows) == 1 and "killed by signal 9" in rows[0][0]
    assert int(rows[0][1]) == pytest.approx(lost_run[1]["expected"][0]["lost_ms"] * 1e6, abs=2000)


def test_whatif_replays_the_last_world(lost_run, capsys):
    from viewer.cli.whatif import main

    path, _ = lost_run
    assert main([str(path), "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["run_settings"]["ranks"] == 3
    assert f"replaying its last generation ({path / 'gen-001'}, 3 ranks)" in cap.err


def test_a_hang_in_the_last_world_names_its_missing_rank(tmp_path):
    """3 -> 4 ranks; in the 4-rank world rank 3 never submits the last step's tensors: a hang on rank 3,
    though the run's smallest world has 3 ranks."""
    import pandas as pd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_elastic_run(tmp_path / "run", worlds=((3, 4), (4, 4)), kinds=("added",), commit_every=4)
        run = Run.load(tmp_path / "run", cache=False)
    ops = run.tables.tensor_ops
    last = (ops["step"] == ops["step"].max())
    drop = last & (ops["rank"] == 3)
    keep = last & ~drop
    ops = ops[~drop].copy()
    ops.loc[keep[~drop], ["done_ns", "end_ns"]] = pd.NA   # the others wait for it forever
    run.tables.tensor_ops = ops.reset_index(drop=True)
    run._memo.clear()
    h = run.hangs()
    assert len(h) and (h["kind"] == "missing").all() and all(m == [3] for m in h["missing_ranks"])


def test_driver_record_without_end_or_first_step_falls_back_on_the_traces(tmp_path, lost_run, capsys, monkeypatch):
    """A driver that died mid-job leaves the last generation without an end and the reset without its
    restore and first step: the ranks' ELASTIC_RESTORE / ELASTIC_RESET slices and last events stand in."""
    from viewer.cli.summarize import main

    d = _broken(tmp_path, lost_run)
    m = json.loads((d / "elastic.json").read_text())
    m["generations"][-1].update(end_epoch_ns=None, end=None)
    m["resets"][0].update(restored_epoch_ns=None, first_step_end_epoch_ns=None)
    (d / "elastic.json").write_text(json.dumps(m))
    run = _load(d, cache=False)
    row = run.recoveries().iloc[0]
    exp = lost_run[1]["expected"][0]
    assert row["restore_ms"] == pytest.approx(exp["restore_ms"], abs=0.01)
    assert row["lost_ms"] == pytest.approx(exp["lost_ms"], abs=0.01)
    ev = run.events
    end = int((ev["t_ns"] + ev["dur_ns"]).max())
    assert row["share_pct"] == pytest.approx(100 * row["cost_ms"] * 1e6 / end)
    monkeypatch.setenv("COLUMNS", "120")   # a line rich does not wrap
    assert main([str(d), "--full"]) == 0 and "ended: ?" in capsys.readouterr().out
