"""ringscope merge: one Chrome trace, one process per rank sorted by rank, aligned, nesting slices."""
from __future__ import annotations

import json
import subprocess
import sys
import warnings

from tests.viewer import tracegen
from tests.viewer.conftest import ROOT
from viewer.merge import MERGED_KEY, plan_merge, write_merged


def _check_nesting(events):
    """Every (pid, tid) holds X slices that nest (what Perfetto needs to avoid overflow tracks)."""
    lanes = {}
    for e in events:
        if e.get("ph") == "X":
            lanes.setdefault((e["pid"], e.get("tid")), []).append(
                (round(e["ts"] * 1000), round(e["ts"] * 1000) + round(e.get("dur", 0) * 1000)))
    for key, spans in lanes.items():
        stack = []
        for s, e in sorted(spans, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= s:
                stack.pop()
            assert not stack or e <= stack[-1], f"overlapping slices on {key}"
            stack.append(e)


def test_merge_aligns_and_sorts(tmp_path):
    tracegen.write_run(tmp_path / "run", size=3, steps=2, offsets={1: 5_000_000, 2: -3_000_000})
    out = tmp_path / "merged.json"
    p = subprocess.run([sys.executable, "-m", "viewer.cli", "merge", str(tmp_path / "run"), "-o", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    d = json.loads(out.read_text())
    evs = d["traceEvents"]
    assert d["otherData"][MERGED_KEY]["origin_epoch_ns"] == tracegen.BASE_EPOCH_NS
    names = [e for e in evs if e.get("name") == "process_name"]
    assert [e["pid"] for e in names] == [0, 1, 2]
    sort = {e["pid"]: e["args"]["sort_index"] for e in evs if e.get("name") == "process_sort_index"}
    assert sort == {0: 0, 1: 1, 2: 2}
    # the same fused response starts at the same merged instant on every rank (offsets applied)
    fused = [e for e in evs if e.get("name") == "FUSED_RESPONSE"]
    by_resp = {}
    for e in fused:
        by_resp.setdefault(e["args"]["response"], set()).add(e["ts"])
    assert all(len(v) == 1 for v in by_resp.values())
    _check_nesting(evs)
    # the merged file is not mistaken for a rank trace when it sits in the run directory
    (tmp_path / "run" / "merged.json").write_bytes(out.read_bytes())
    assert len(plan_merge(tmp_path / "run").ranks) == 3
    # ... and named explicitly it is refused with one line, not misread as one rank
    p = subprocess.run([sys.executable, "-m", "viewer.cli", "summarize", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "merged trace" in p.stderr and "Traceback" not in p.stderr


def test_overlapping_slices_get_their_own_lane(tmp_path):
    ev = tracegen.rank_events(0, 1, steps=1)
    real = next(e for e in ev if e["name"] == "FUSED_RESPONSE")
    ev.append({"ph": "X", "name": "FUSED_RESPONSE", "cat": "fusion", "pid": 0, "tid": 3,
               "ts": real["ts"] + real["dur"] / 2, "dur": real["dur"], "args": {"response": 99}})
    (tmp_path / "r").mkdir()
    tracegen.write_rank(tmp_path / "r" / "rank-0.json", 0, 1, sorted(ev, key=lambda e: e["ts"]))
    out = tmp_path / "m.json"
    stats = write_merged(plan_merge(tmp_path / "r"), out)
    assert stats["overlap_lanes"] >= 1
    evs = json.loads(out.read_text())["traceEvents"]
    _check_nesting(evs)
    assert any(e.get("name") == "thread_name" and "overlap" in e["args"]["name"] for e in evs)


def test_extra_events_hook(tmp_path):
    tracegen.write_run(tmp_path / "run", size=2, steps=1)
    plan = plan_merge(tmp_path / "run")
    extra = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 900, "args": {"name": "gpu:stream 7"}},
             {"ph": "X", "name": "ncclDevKernel_AllReduce", "pid": 1, "tid": 900, "ts": 50.0, "dur": 10.0}]
    write_merged(plan, tmp_path / "m.json", extra_events=extra)
    evs = json.loads((tmp_path / "m.json").read_text())["traceEvents"]
    assert any(e.get("name") == "ncclDevKernel_AllReduce" and e["pid"] == 1 for e in evs)
    assert any(e.get("args", {}).get("name") == "gpu:stream 7" for e in evs)


def test_merged_real_run_opens_cleanly_in_perfetto(tmp_path):
    """A real 4-rank run, merged, loads in the real Perfetto UI with no import errors or data loss."""
    import pytest

    from tests.mpi_util import run_mpi
    from tests.tracer.perfetto_util import chromium_missing_reason, perfetto
    from tests.viewer.test_real_run import SCRIPT

    reason = chromium_missing_reason()
    if reason:
        pytest.skip(f"Perfetto check needs a browser: {reason}")
    (tmp_path / "t").mkdir()
    proc = run_mpi(4, [SCRIPT], env={"RINGSCOPE_TIMELINE": str(tmp_path / "t") + "/", "STEPS": 3,
                                     "SLOW_RANK": 1, "RINGSCOPE_TIMELINE_MARK_CYCLES": "1"}, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:]
    out = tmp_path / "merged.json"
    stats = write_merged(plan_merge(tmp_path / "t"), out)
    assert stats["ranks"] == 4
    evs = json.loads(out.read_text())["traceEvents"]
    _check_nesting(evs)
    with perfetto(out, screenshot=tmp_path / "merged.png") as ui:
        assert ui.problems == [], f"Perfetto import problems: {ui.problems}"
    assert (tmp_path / "merged.png").stat().st_size > 10_000


def test_tensor_threads_keep_their_names(tmp_path):
    """Format 3: each tensor's thread keeps its name in the merged trace (overlap lanes stay clear)."""
    tracegen.write_run(tmp_path / "run", size=2, steps=2, late_rank=1)
    out = tmp_path / "m.json"
    write_merged(plan_merge(tmp_path / "run"), out)
    evs = json.loads(out.read_text())["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs if e.get("name") == "thread_name"}
    assert names[(0, 1000)] == names[(1, 1000)] == "grad.a" and names[(1, 1001)] == "grad.b"
    life = [e for e in evs if e.get("cat") == "tensor"]
    assert {e["ph"] for e in life} == {"X", "B", "E"}
    assert all(names[(e["pid"], e["tid"])] == e["name"] for e in life)
    _check_nesting(evs)


def _merged(path):
    d = json.loads(path.read_text())
    return d, sorted({e["pid"] for e in d["traceEvents"] if e.get("name") == "process_name"})


def test_merge_of_some_ranks_reads_only_theirs(tmp_path, capsys, monkeypatch):
    from viewer.cli.merge import main

    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)   # the CLI prints them: restored after

    run = tmp_path / "run"
    tracegen.write_run(run, size=6, steps=2, offsets={5: 3_000_000})
    tracegen.write_rank(run / "rank-2.json", 2, 6, tracegen.rank_events(2, 6, steps=2),   # started 4 ms earlier
                        meta={"base_epoch_ns": tracegen.BASE_EPOCH_NS - 4_000_000})
    bad = run / "rank-1.json"   # damaged after its header: a merge that read it would say so
    bad.write_text(bad.read_text().replace('"ph": "X"', '"ph": X', 1))
    assert main([str(run), "-o", str(tmp_path / "sub.json"), "--ranks", "0,4-5"]) == 0
    assert "rank-1.json" not in capsys.readouterr().err
    assert main([str(run), "-o", str(tmp_path / "all.json"), "--ranks", "0-5"]) == 0
    assert "rank-1.json: 1 damaged line" in capsys.readouterr().err
    d, pids = _merged(tmp_path / "sub.json")
    assert pids == [0, 4, 5]
    full = plan_merge(run)   # time 0 is the whole run's (rank 2 started first), so the subset lines up with it
    assert d["otherData"][MERGED_KEY]["origin_epoch_ns"] == full.origin_epoch_ns == tracegen.BASE_EPOCH_NS - 4_000_000
    fused = {}
    for e in d["traceEvents"]:
        if e.get("name") == "FUSED_RESPONSE":
            fused.setdefault(e["args"]["response"], set()).add(e["ts"])
    assert fused and all(len(v) == 1 for v in fused.values())   # rank 5's offset applied
    for spec, says in [("4-2", "runs backwards"), ("0,x", "'x' is not a rank"), ("3,7-9", "no trace of rank 7-9")]:
        assert main([str(run), "-o", str(tmp_path / "bad.json"), "--ranks", spec]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err
    assert not (tmp_path / "bad.json").exists()


def test_top_late_merges_the_latest_ranks_and_a_reference(tmp_path, capsys, monkeypatch):
    from viewer.cli.merge import main

    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    monkeypatch.setenv("RINGSCOPE_CACHE_DIR", str(tmp_path / "store"))
    tracegen.write_run(tmp_path / "run", size=5, steps=3, late_rank=3)
    assert main([str(tmp_path / "run"), "-o", str(tmp_path / "late.json"), "--top-late", "1"]) == 0
    assert "(late: 3; reference: 0)" in capsys.readouterr().out
    assert _merged(tmp_path / "late.json")[1] == [0, 3]
    # rank 0 late itself: the reference is the most punctual rank (tracegen's ranks submit 10 us apart)
    tracegen.write_run(tmp_path / "run0", size=4, steps=3, late_rank=0)
    assert main([str(tmp_path / "run0"), "-o", str(tmp_path / "late0.json"), "--top-late", "1"]) == 0
    out = capsys.readouterr().out
    assert "(late: 0; reference: 1)" in out and _merged(tmp_path / "late0.json")[1] == [0, 1]
