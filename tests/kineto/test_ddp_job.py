"""A real CPU DDP job profiled with torch.profiler on 2 gloo ranks: it loads, shows its allreduces, and
goes through summarize and merge."""
from __future__ import annotations

import contextlib
import io
import json

import pytest

BUCKET = (256 * 512 + 512 + 512 * 64 + 64) * 4   # the model's gradients in one float32 bucket


def _cli(main, argv):
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        rc = main(argv)
    return rc, o.getvalue(), e.getvalue().splitlines()


def test_loads_with_ranks_steps_and_allreduces(ddp_run):
    from viewer.run import Run

    run = Run.load(ddp_run)
    assert run.ranks["rank"].tolist() == [0, 1]
    assert set(run.ranks["format"]) == {"kineto"} and set(run.ranks["backend"]) == {"gloo"}
    assert run.size == 2 and run.ranks["closed"].all() and not run.meta["skipped"]
    steps = sorted(run.events.loc[run.events["name"].str.startswith("ProfilerStep#"), "step"].unique())
    assert steps == [2, 3, 4]   # wait=1, warmup=1, active=3
    fo = run.fused_ops
    assert set(fo["op"]) == {"ALLREDUCE"} and set(fo["backend"]) == {"gloo"}
    for rank in (0, 1):
        mine = fo[fo["rank"] == rank]
        # per step: DDP's gradient bucket and the loss averaged for logging (one float32)
        assert sorted(mine["bytes"].tolist()) == sorted([BUCKET] * 3 + [4] * 3)
        assert (mine["end_ns"] > mine["start_ns"]).all() and set(mine["step"]) == {2, 3, 4}
    # the same collective has the same name on both ranks
    names = run.tensor_ops.groupby("rank")["tensor"].apply(sorted)
    assert names[0] == names[1]
    # a CPU thread per OS thread; the allreduces run on gloo's own threads
    ev = run.events
    comm_threads = set(ev.loc[ev["response"] >= 0, "thread"])
    assert comm_threads and all(t.startswith("cpu:") for t in comm_threads)
    assert not ev["thread"].str.startswith("gpu").any()


def test_clock_offset_and_stragglers(ddp_run):
    from viewer.kineto import collectives
    from viewer.run import Run

    run = Run.load(ddp_run)
    r = run.ranks.set_index("rank")
    assert r.loc[0, "clock_offset_ns"] == 0
    # one host, one clock: the estimate must contain 0 within its uncertainty
    assert abs(r.loc[1, "clock_offset_ns"]) <= r.loc[1, "clock_offset_uncertainty_ns"] + 1000
    st = collectives.collective_stragglers(run.tables, run.kineto_launches())
    assert len(st) == 6 and set(st["n_ranks"]) == {2} and st["last_rank"].isin([0, 1]).all()
    per_rank = collectives.rank_summary(run.tables, run.kineto_launches())
    assert per_rank["times_last"].sum() == 6


def test_rank_from_file_name_when_distributed_info_is_missing(ddp_run, tmp_path):
    from viewer.run import Run

    for f in sorted(ddp_run.glob("*.json")):
        data = json.loads(f.read_text())
        del data["distributedInfo"]
        (tmp_path / f.name).write_text(json.dumps(data))
    run = Run.load(tmp_path)
    assert run.ranks["rank"].tolist() == [0, 1]   # worker0.<ts>.pt.trace.json, worker1...


def test_summarize_and_merge(ddp_run, tmp_path):
    from viewer.cli import merge, summarize

    rc, out, err = _cli(summarize.main, [str(ddp_run), "--json"])
    assert rc == 0 and not err, err
    data = json.loads(out)
    assert data["run"]["format"] == "kineto" and data["run"]["steps"] == 3
    k = data["kineto"]
    assert {r["op"] for r in k["collectives"]} == {"ALLREDUCE"}
    assert {r["bytes"] for r in k["collectives"]} == {4, BUCKET}
    assert all(r["algbw_gbps"] > 0 for r in k["collectives"])
    assert [(r["rank"], r["step"]) for r in k["steps"]] == [(0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4)]
    assert all(r["collectives"] == 2 and r["communication_ns"] > 0 for r in k["steps"])
    assert k["temporal_breakdown"] == [] and k["overlap"] == []   # CPU only: no GPU time to break down
    rc, out, err = _cli(summarize.main, [str(ddp_run), "--full"])
    assert rc == 0 and "Collectives" in out and "ALLREDUCE" in out
    merged = tmp_path / "m.json"
    rc, out, err = _cli(merge.main, [str(ddp_run), "-o", str(merged)])
    assert rc == 0 and not err, err
    doc = json.loads(merged.read_bytes())
    evs = doc["traceEvents"]
    assert {e["pid"] for e in evs} == {0, 1}
    names = {e["args"]["name"] for e in evs if e.get("name") == "process_name"}
    assert names and all(n.startswith("rank ") for n in names)
    gloo = [e for e in evs if e.get("name") == "gloo:all_reduce"]
    assert len(gloo) == 12 and {e["args"]["bytes"] for e in gloo} == {4, BUCKET}


def test_gzip_and_single_file(ddp_run, tmp_path):
    import gzip

    from viewer.run import Run

    f = sorted(ddp_run.glob("*.json"))[1]
    gz = tmp_path / (f.name + ".gz")
    gz.write_bytes(gzip.compress(f.read_bytes()))
    a, b = Run.load(f), Run.load(gz)
    assert a.ranks["rank"].tolist() == b.ranks["rank"].tolist() == [1]
    assert len(a.events) == len(b.events) and (a.fused_ops["bytes"] == b.fused_ops["bytes"]).all()


def test_dashboard_loads_a_kineto_run(ddp_run):
    pytest.importorskip("dash")
    from viewer.dashboard.registry import load_run

    run, notes = load_run(ddp_run)
    assert not notes and run.fused_ops["op"].eq("ALLREDUCE").all() and len(run.fused_ops) == 12
