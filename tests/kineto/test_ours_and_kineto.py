"""Our trace and torch.profiler's of the same 2-rank job (our runtime, timeline on, hvd.timeline.profile
alongside): one run directory loads as one run, each rank's Kineto lanes beside ours on one axis."""
from __future__ import annotations

import contextlib
import io
import json

import pytest

from tests.mpi_util import run_mpi
from tests.viewer.conftest import ROOT


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory):
    pytest.importorskip("torch", reason="torch is not installed (pip install -e .[torch])")
    d = tmp_path_factory.mktemp("mixed")
    p = run_mpi(2, [ROOT / "tests" / "kineto" / "scripts" / "ours_and_kineto.py"],
                env={"RINGSCOPE_TIMELINE": str(d) + "/", "OMP_NUM_THREADS": "1"}, timeout=240)
    assert p.returncode == 0, p.stdout[-4000:]
    assert len(list(d.glob("rank-*.json"))) == 2 and len(list((d / "kineto").glob("rank*.pt.trace.json"))) == 2
    return d


def test_one_run_one_axis(mixed_run):
    from viewer.run import Run

    run = Run.load(mixed_run, cache=False)
    assert run.ranks["rank"].tolist() == [0, 1] and set(run.ranks["format"]) == {"ringscope"}
    assert len(run.meta["files"]) == 2
    ev = run.events
    for rank in (0, 1):
        mine = ev[ev["rank"] == rank]
        cpu = mine[mine["thread"].str.startswith("cpu:")]
        ours = mine[~mine["thread"].str.startswith("cpu:") & (mine["thread"] != "profiler")]
        assert len(cpu) > 100 and len(ours) > 10
        # the profiled steps lie within our trace's span of the same rank (same wall clock)
        steps = cpu[cpu["name"].str.startswith("ProfilerStep#")]
        assert len(steps) == 3
        assert steps["t_ns"].min() >= ours["t_ns"].min() - 1_000_000
        assert (steps["t_ns"] + steps["dur_ns"]).max() <= (ours["t_ns"] + ours["dur_ns"]).max() + 1_000_000
        # torch's backward runs while our runtime reduces the gradients: they interleave in time
        bwd = cpu[cpu["name"].str.contains("Backward")]
        assert len(bwd) and bwd["t_ns"].between(ours["t_ns"].min(), ours["t_ns"].max()).all()
    assert len(run.tensor_ops) and set(run.tensor_ops["op"]) <= {"ALLREDUCE", "BROADCAST"}


def test_summarize_has_both(mixed_run):
    from viewer.cli import summarize

    o = io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(io.StringIO()):
        rc = summarize.main([str(mixed_run), "--json", "--no-cache"])
    data = json.loads(o.getvalue())
    assert rc == 0 and data["run"]["format"] == "ringscope" and data["breakdown"]   # our phases stay
    assert [r["step"] for r in data["kineto"]["steps"]] == [1, 2, 3, 1, 2, 3]       # and the profiled steps


def test_merge_writes_both_on_one_axis(mixed_run, tmp_path):
    from viewer.cli import merge

    out = tmp_path / "m.json"
    e = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(e):
        rc = merge.main([str(mixed_run), "-o", str(out)])
    assert rc == 0, e.getvalue()
    evs = json.loads(out.read_bytes())["traceEvents"]
    lanes = {(x["pid"], x["args"]["name"]) for x in evs if x.get("name") == "thread_name"}
    for rank in (0, 1):
        names = {n for p, n in lanes if p == rank}
        assert any(n.startswith("cpu:") for n in names) and any(not n.startswith(("cpu:", "profiler")) for n in names)


def _nesting(run):
    """Per rank, (Kineto optimizer steps around ours, ours around Kineto's) as the run places them."""
    ev = run.events
    out = {}
    for rank in (0, 1):
        mine = ev[ev["rank"] == rank]
        ours = mine[mine["name"] == "OPTIMIZER_STEP"]
        theirs = mine[mine["name"].str.startswith("Optimizer.step#")]
        around = inside = 0
        for a, d in zip(ours["t_ns"], ours["dur_ns"]):
            b = a + d
            for s, e in zip(theirs["t_ns"], theirs["t_ns"] + theirs["dur_ns"]):
                around += bool(s <= a and e >= b)
                inside += bool(s >= a and e <= b)
        out[rank] = (around, inside)
    return out


def test_the_alignment_is_refined_on_the_optimizer_steps_both_recorded(mixed_run, tmp_path):
    """Our OPTIMIZER_STEP sits inside torch's Optimizer.step# hook span and around the wrapped
    optimizer's: those pairs bound the residual offset after the wall clock. A Kineto wall clock read
    3 ms wrong is corrected exactly (the bounds move with it)."""
    import shutil

    import pandas as pd

    from viewer.run import Run

    run = Run.load(mixed_run, cache=False)
    got = sorted(run.meta["kineto_alignment"], key=lambda a: a["rank"])
    assert [a["rank"] for a in got] == [0, 1]
    for a in got:
        assert a["spans"] >= 6 and a["refined_ns"] is not None, a
        assert a["uncertainty_ns"] < 500_000 and abs(a["refined_ns"]) < 5_000_000, a
    assert all(around >= 3 and inside >= 3 for around, inside in _nesting(run).values()), _nesting(run)

    moved = tmp_path / "moved"
    shutil.copytree(mixed_run, moved)
    for f in (moved / "kineto").glob("*.json"):
        doc = json.loads(f.read_bytes())
        doc["baseTimeNanoseconds"] += 3_000_000
        f.write_text(json.dumps(doc))
    run2 = Run.load(moved, cache=False)
    got2 = sorted(run2.meta["kineto_alignment"], key=lambda a: a["rank"])
    for a, b in zip(got, got2):
        assert b["wall_clock_shift_ns"] == a["wall_clock_shift_ns"] + 3_000_000
        assert b["refined_ns"] == a["refined_ns"] - 3_000_000 and b["uncertainty_ns"] == a["uncertainty_ns"]
    cols = ["rank", "thread", "name", "t_ns", "dur_ns"]
    pd.testing.assert_frame_equal(run.events[cols], run2.events[cols])
