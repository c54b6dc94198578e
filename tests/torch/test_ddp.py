"""hvd.timeline.watch on a real DistributedDataParallel job: one torchrun launch (2 ranks, gloo, CPU,
tests/torch/ddp_job.py) trains the same model with and without the watch, with DDP's default
reduction and with fp16_compress_hook registered before the watch; the tests read its traces, what
summarize and merge make of them, and the trained parameters."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from collectives.launcher import checkout_env, run_job
from tests.torch import ddp_job
from tracer import vocab as V

RANKS = 2
PARAM_BYTES = 4 * (32 * 64 + 64 + 64 * 64 + 64 + 64 * 4 + 4)   # the job's model, float32


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    traces = out / "traces"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={RANKS}",
           Path(ddp_job.__file__), out]
    rc, log = run_job(cmd, checkout_env({"RINGSCOPE_TIMELINE": f"{traces}/", "OMP_NUM_THREADS": "1",
                                         "RINGSCOPE_TIMELINE_COUNTERS_HZ": "0"}), timeout=240)
    assert rc == 0, f"torchrun exited {rc}\n{log[-6000:]}"
    results = [json.loads((out / f"result.{r}.json").read_text()) for r in range(RANKS)]
    params = [torch.load(out / f"params.{r}.pt") for r in range(RANKS)]
    trace = [json.loads((traces / f"rank-{r:05d}.json").read_text()) for r in range(RANKS)]
    return {"dir": traces, "results": results, "params": params, "trace": trace}


def _x(trace, name):
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["name"] == name]


def _in_steps(events, steps):
    lo, hi = steps
    return [e for e in events if lo <= e["args"]["step"] < hi]


@pytest.mark.parametrize("run, watched", [("plain", "plain_watched"), ("fp16", "fp16_watched"),
                                          ("fp16", "fp16_after_watch")])
def test_watch_leaves_training_bit_identical(job, run, watched):
    for params in job["params"]:
        assert all(torch.equal(a, b) for a, b in zip(params[run], params[watched], strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(job["params"][0]["plain"], job["params"][0]["fp16"]))


def test_trace_says_where_it_came_from_and_lines_ranks_up(job):
    for r, trace in enumerate(job["trace"]):
        meta = trace["otherData"][V.VERSION_KEY]
        assert (meta["source"], meta["rank"], meta["size"], meta["backend"]) == (V.SOURCE_DDP, r, RANKS, "gloo")
        assert meta["ddp"]["bucket_cap_bytes"] == int(ddp_job.BUCKET_CAP_MB * 1024 * 1024)
        assert meta["ddp"]["comm_hook"] is None   # the first watched run kept DDP's own reduction
        assert meta["clock_offset_uncertainty_ns"] is not None and 0 <= meta["clock_offset_uncertainty_ns"] < 50e6
    assert all(res["closed_at_destroy"] for res in job["results"])
    offsets = [t["otherData"][V.VERSION_KEY]["clock_offset_ns"] for t in job["trace"]]
    assert offsets[0] == 0 and offsets[1] == pytest.approx(ddp_job.SKEW_US * 1000, abs=5e6)   # rank 1 skewed


def test_merged_ranks_line_up(job):
    from viewer import Run
    fo = Run.load(job["dir"], cache=False).tables.fused_ops
    ends = fo.pivot_table(index="response", columns="rank", values="end_ns")
    assert len(ends) >= 3 * ddp_job.STEPS
    # one collective ends at about the same time on both ranks, despite rank 1's skewed clock (a loaded
    # machine may hold one rank's end back by a descheduled thread: the median, and a loose bound on all)
    diff = (ends[0] - ends[1]).abs()
    assert diff.median() < 0.05 * ddp_job.SKEW_US * 1000 and diff.max() < 0.5 * ddp_job.SKEW_US * 1000


@pytest.mark.parametrize("run", ["plain_watched", "fp16_watched", "fp16_after_watch"])
def test_every_bucket_of_every_step_with_its_bytes_and_params(job, run):
    steps = job["results"][0]["steps"][run]
    assert steps[1] - steps[0] == ddp_job.STEPS
    per_rank = []
    for trace in job["trace"]:
        fused = _in_steps(_x(trace, V.FUSED_RESPONSE), steps)
        comm = {e["args"]["response"]: e for e in _in_steps(_x(trace, "GLOO_ALLREDUCE"), steps)}
        ops = {(e["name"], e["args"]["step"]): e for e in trace["traceEvents"] if e.get("cat") == V.CAT_TENSOR}
        for step in range(*steps):
            mine = [e for e in fused if e["args"]["step"] == step]
            # DDP's first step reduces all in one bucket; then in buckets of the 10 KiB cap, rebuilt in
            # the order the gradients came
            assert len(mine) == 1 if step == steps[0] else len(mine) >= 2
            assert sum(e["args"]["bytes"] for e in mine) == PARAM_BYTES
            assert sorted(e["args"]["bucket"] for e in mine) == list(range(len(mine)))
            assert sorted(p for e in mine for p in e["args"]["params"]) == sorted(
                f"{i}.{w}" for i in (0, 2, 4) for w in ("weight", "bias"))
            for e in mine:
                a = e["args"]
                assert a["tensors"] == [f"bucket.{a['bucket']}"] and a["count"] == len(a["params"])
                c, op = comm[a["response"]], ops[(f"bucket.{a['bucket']}", step)]
                assert c["args"]["bytes"] == op["args"]["bytes"] == a["bytes"]
                assert e["ts"] <= c["ts"] and c["ts"] + c["dur"] == pytest.approx(e["ts"] + e["dur"], abs=1e-3)
                assert op["ts"] == pytest.approx(e["ts"], abs=1e-3)   # ready: the hook's call
        per_rank.append(sorted((e["args"]["response"], e["args"]["bucket"], e["args"]["bytes"]) for e in fused))
    assert per_rank[0] == per_rank[1]   # the k-th bucket launched is the same collective on every rank


@pytest.mark.parametrize("run", ["plain_watched", "fp16_watched", "fp16_after_watch"])
def test_phases_of_each_step(job, run):
    steps = job["results"][0]["steps"][run]
    for trace in job["trace"]:
        phases = {n: _in_steps(_x(trace, n), steps) for n in (V.FORWARD, V.BACKWARD, V.OPTIMIZER_STEP)}
        assert all(len(v) == ddp_job.STEPS for v in phases.values()), {n: len(v) for n, v in phases.items()}
        # a wait per batch, and the one that ended the loader (the last step's, or the next run's first)
        assert len(_in_steps(_x(trace, V.DATA_WAIT), steps)) in (ddp_job.STEPS, ddp_job.STEPS + 1)
        fused = _in_steps(_x(trace, V.FUSED_RESPONSE), steps)
        syncs = _in_steps(_x(trace, V.SYNCHRONIZE), steps)
        for b in phases[V.BACKWARD]:
            end = b["ts"] + b["dur"]
            mine = [e for e in fused if e["args"]["step"] == b["args"]["step"]]
            assert all(b["ts"] <= e["ts"] and e["ts"] + e["dur"] <= end + 1e-3 for e in mine)   # ends after them
            sync = [s for s in syncs if s["args"]["step"] == b["args"]["step"]]
            assert len(sync) == 1 and b["ts"] <= sync[0]["ts"] and sync[0]["ts"] + sync[0]["dur"] <= end + 1e-3
        assert len(_in_steps(_x(trace, V.STEP), steps)) >= ddp_job.STEPS - 1


def test_summarize_reads_ddp_and_gives_no_runtime_advice(job, capsys):
    from viewer.cli.summarize import main
    assert main([str(job["dir"]), "--full", "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "ddp" in text and "Stragglers" in text and "Where the step went" in text
    for advice in ("RINGSCOPE_", "HOROVOD_", "FUSION_THRESHOLD", "CYCLE_TIME"):
        assert advice not in text
    assert main([str(job["dir"]), "--json", "--no-cache"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert {f["kind"] for f in summary["findings"]}.isdisjoint({"fusion_threshold", "fusion_starved", "exposed"})
    assert summary["headline"]["ranks"] == RANKS


def test_merge_lines_the_ranks_up(job, tmp_path):
    from viewer.cli.merge import main
    out = tmp_path / "merged.json"
    assert main([str(job["dir"]), "-o", str(out)]) == 0
    merged = json.loads(out.read_text())
    assert {e["pid"] for e in merged["traceEvents"] if e.get("name") == V.FUSED_RESPONSE} == set(range(RANKS))


def test_optimizer_is_for_a_ddp_module():
    import collectives.torch as hvd
    net = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="DistributedDataParallel"):
        hvd.timeline.watch(net, optimizer=torch.optim.SGD(net.parameters(), lr=0.1))


def test_dashboard_pages_and_timeline(job):
    from viewer.dashboard import pages
    from viewer.dashboard.fig_timeline import timeline_figure
    from viewer.dashboard.registry import Registry
    held = Registry().add_path(job["dir"])
    for page in (pages.breakdown, pages.negotiation, pages.fusion, pages.communication):
        assert page(held)
    names = {t.name for t in timeline_figure(held.timeline.window(ranks=[1])).data}
    assert {"COMM", "SYNCHRONIZE", "BACKWARD", "FORWARD"} <= names, names
