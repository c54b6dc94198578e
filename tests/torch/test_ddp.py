"""hvd.timeline.watch on a real DistributedDataParallel job: one torchrun launch (2 ranks, gloo, CPU,
tests/torch/ddp_job.py) trains the same model with and without the watch, with DDP's default
reduction and with fp16_compress_hook registered before the watch, then a model with a bucket cap far
too small for it, then plants a hang and writes torch's Flight Recorder dumps; the tests read its
traces, what summarize and merge make of them, the trained parameters and the dumps."""
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
                                         "RINGSCOPE_TIMELINE_COUNTERS_HZ": "0", "TORCH_FR_BUFFER_SIZE": "2000"}),
                      timeout=240)
    assert rc == 0, f"torchrun exited {rc}\n{log[-6000:]}"
    results = [json.loads((out / f"result.{r}.json").read_text()) for r in range(RANKS)]
    params = [torch.load(out / f"params.{r}.pt") for r in range(RANKS)]
    trace = [json.loads((traces / f"rank-{r:05d}.json").read_text()) for r in range(RANKS)]
    return {"dir": traces, "results": results, "params": params, "trace": trace, "out": out}


def _x(trace, name):
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["name"] == name]


def _in_steps(events, steps):
    lo, hi = steps
    return [e for e in events if lo <= e["args"]["step"] < hi]


@pytest.mark.parametrize("run, watched", [("plain", "plain_watched"), ("fp16", "fp16_watched"),
                                          ("fp16", "fp16_after_watch"), ("fsdp", "fsdp_watched"),
                                          ("fsdp1", "fsdp1_watched")])
def test_watch_leaves_training_bit_identical(job, run, watched):
    for params in job["params"]:
        assert all(torch.equal(a, b) for a, b in zip(params[run], params[watched], strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(job["params"][0]["plain"], job["params"][0]["fp16"]))
    assert not all(torch.equal(a, b) for a, b in zip(job["params"][0]["fsdp"], job["params"][1]["fsdp"]))   # shards


def test_trace_says_where_it_came_from_and_lines_ranks_up(job):
    for r, trace in enumerate(job["trace"]):
        meta = trace["otherData"][V.VERSION_KEY]
        assert (meta["source"], meta["rank"], meta["size"], meta["backend"]) == (V.SOURCE_DDP, r, RANKS, "gloo")
        assert meta["ddp"]["bucket_cap_bytes"] == int(ddp_job.BUCKET_CAP_MB * 1024 * 1024)
        assert meta["ddp"]["comm_hook"] is None   # the first watched run kept DDP's own reduction
        assert meta["clock_offset_uncertainty_ns"] is not None and 0 <= meta["clock_offset_uncertainty_ns"] < 50e6
    assert all(res["closed_at_destroy"] for res in job["results"])   # the small-cap run's trace, the last
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
    for advice in HOROVOD_ADVICE:
        assert advice not in text
    assert main([str(job["dir"]), "--json", "--no-cache"]) == 0
    summary = json.loads(capsys.readouterr().out)
    kinds = {f["kind"] for f in summary["findings"]}
    assert kinds.isdisjoint({"fusion_threshold", "fusion_starved", "exposed", "bucket_cap_small"}), kinds
    assert summary["headline"]["ranks"] == RANKS
    buckets = summary["ddp"]["buckets"]   # the usual layout of the 10 KiB cap: 2 buckets a step
    assert [b["bucket"] for b in buckets] == [0, 1] and sum(b["bytes"] for b in buckets) == PARAM_BYTES


HOROVOD_ADVICE = ("RINGSCOPE_", "HOROVOD_", "FUSION_THRESHOLD", "CYCLE_TIME", "hierarchical")


def test_too_small_bucket_cap_gets_the_figure_to_try(job, capsys):
    from viewer.cli.summarize import main
    small = job["out"] / ddp_job.SMALL_CAP_DIR
    assert main([str(small), "--json", "--no-cache"]) == 0
    summary = json.loads(capsys.readouterr().out)
    found = [f for f in summary["findings"] if f["kind"] == "bucket_cap_small"]
    grads = ddp_job.SMALL_LAYERS * 4 * (ddp_job.SMALL_WIDTH + 1) * ddp_job.SMALL_WIDTH
    assert len(found) == 1 and found[0]["evidence"]["value"] == ddp_job.SMALL_LAYERS   # a bucket per layer
    msg = found[0]["message"]
    assert f"bucket_cap_mb={ddp_job.SMALL_CAP_MB:g} splits" in msg
    from viewer.findings.ddp import figure_mb
    assert f"bucket_cap_mb={figure_mb(grads / 4):g})" in msg and figure_mb(grads / 4) > ddp_job.SMALL_CAP_MB
    assert sum(b["bytes"] for b in summary["ddp"]["buckets"]) == grads
    assert main([str(small), "--full", "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "DDP buckets" in text and not any(a in text for a in HOROVOD_ADVICE)


def test_whatif_and_tune_refuse_a_ddp_trace_in_one_line(job, capsys):
    from viewer.cli import tune, whatif
    for cli in (whatif, tune):
        assert cli.main([str(job["dir"])]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "DDP" in err and not any(a in err for a in HOROVOD_ADVICE)


def test_bucket_cut_is_torchs():
    """bench/ddp_bucket_model.py cuts the parameters as torch's reducer rebuilds its buckets (gradient order)."""
    import random

    import torch.distributed as dist

    from bench.ddp_bucket_model import cut
    rng = random.Random(1)
    for _ in range(100):
        numels = [rng.choice([1, 3, 100, 1000, 5000, 20000]) for _ in range(rng.randint(1, 40))]
        first, cap = rng.choice([4_000, 80_000, 200_000]), rng.choice([2_000, 20_000, 240_000])
        torchs, _ = dist._compute_bucket_assignment_by_size(
            [torch.empty(n) for n in numels], [first, cap], [False] * len(numels), list(range(len(numels))))
        assert [len(b) for b in torchs] == cut([4 * n for n in numels], first, cap)


def test_flight_recorder_dumps_name_the_rank_that_skipped_a_collective(job, capsys):
    from viewer import flight_recorder as fr
    from viewer.cli.summarize import main
    fr_dir = job["out"] / ddp_job.FR_DIR
    result = fr.analyze(fr.read_dir(fr_dir))
    default, hung = result["groups"]   # DDP's group, then the planted hang's
    assert default["ranks"] == hung["ranks"] == list(range(RANKS))
    assert not default["missing"] and not default["mismatched"]
    assert min(default["last_completed"].values()) > 10   # DDP's buckets: gloo's work is recorded
    skipped = hung["missing"]
    assert len(skipped) == 1 and skipped[0]["missing_ranks"] == [ddp_job.HANG_RANK]
    assert skipped[0]["seq"] == 2 and skipped[0]["op"] == "gloo:all_reduce" and skipped[0]["sizes"] == [[99]]
    assert hung["last_enqueued"] == {0: 2, 1: 1}
    assert main([str(fr_dir)]) == 0
    text = capsys.readouterr().out
    assert "rank(s) 1 never issued collective #2, gloo:all_reduce (Float [99])" in text


def test_flight_recorder_reader_runs_no_code(tmp_path, capsys):
    import pickle

    from viewer import flight_recorder as fr
    (tmp_path / "rank_0").write_bytes(pickle.dumps({"version": "2.10", "pg_status": {}, "entries": [Path(".")]}))
    assert not fr.is_dump_dir(tmp_path)   # a class in it: not read (a real dump holds none)
    (tmp_path / "rank_0").write_bytes(pickle.dumps({"version": "2.10", "pg_status": {}, "entries": []}))
    assert fr.is_dump_dir(tmp_path) and fr.analyze(fr.read_dir(tmp_path))["groups"] == []


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


def _fsdp_trace(job, rank):
    return json.loads((job["out"] / ddp_job.FSDP_DIR / f"rank-{rank:05d}.json").read_text())


@pytest.mark.parametrize("run", ["fsdp_watched", "fsdp1_watched"])   # FSDP2, FSDP1
def test_fsdp_units_all_gather_and_reduce_scatter_with_their_phase(job, run):
    steps = job["results"][0]["steps"][run]
    units = 3   # the model's three Linear layers, each a unit (the root holds no parameter)
    for r in range(RANKS):
        trace = _fsdp_trace(job, r)
        fused = _in_steps(_x(trace, V.FUSED_RESPONSE), steps)
        for step in range(*steps):
            mine = [e["args"] for e in fused if e["args"]["step"] == step]
            gathers = [a for a in mine if a["op"] == V.ALLGATHER]
            scatters = [a for a in mine if a["op"] == V.REDUCESCATTER]
            # each unit gathered for the forward, again (resharded after it) for the backward, and
            # reduce-scatters its gradients in the backward
            assert sorted(a["phase"] for a in gathers) == ["backward"] * units + ["forward"] * units, gathers
            assert [a["phase"] for a in scatters] == ["backward"] * units
        phases = {n: _in_steps(_x(trace, n), steps) for n in (V.FORWARD, V.BACKWARD, V.OPTIMIZER_STEP)}
        assert all(len(v) == ddp_job.STEPS for v in phases.values())
    # the k-th collective of a group is the same on each rank: same response, op and bytes
    per_rank = [sorted((e["args"]["response"], e["args"]["op"], e["args"]["bytes"])
                       for e in _x(_fsdp_trace(job, r), V.FUSED_RESPONSE)) for r in range(RANKS)]
    assert per_rank[0] == per_rank[1]


def test_raw_collectives_are_recorded_with_their_group(job):
    groups = job["results"][0]["groups"]
    last = job["results"][0]["steps"]["fsdp1_watched"][1]   # the last watched run
    floats = 4 * ddp_job.RAW_NUMEL
    for r in range(RANKS):
        raw = [e for e in _x(_fsdp_trace(job, r), V.FUSED_RESPONSE) if e["args"]["step"] == last]
        got = [(e["args"]["op"], e["args"]["process_set"], e["args"]["bytes"]) for e in raw]
        default, own = int(groups["default"]), int(groups["own"])
        assert got == [(V.ALLREDUCE, default, floats), (V.ALLGATHER, default, floats),
                       (V.REDUCESCATTER, default, floats), (V.BROADCAST, default, floats), (V.BARRIER, default, 0),
                       (V.ALLREDUCE, own, floats)], got   # the last one async: recorded at its completion
        assert all("phase" not in e["args"] for e in raw)   # outside the watched module's passes


def test_summarize_reads_fsdp_without_runtime_advice(job, capsys):
    from viewer.cli.summarize import main
    assert main([str(job["out"] / ddp_job.FSDP_DIR), "--full", "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "Where the step went" in text and not any(a in text for a in HOROVOD_ADVICE)


def test_flight_recorder_names_a_member_without_a_dump(job, tmp_path):
    """Rank 0's real dump alone, its pg_config filled as NCCL's recorder fills it (gloo's is empty)."""
    import pickle

    from viewer import flight_recorder as fr
    dump = pickle.loads((job["out"] / ddp_job.FR_DIR / "rank_0").read_bytes())
    dump["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}
    (tmp_path / "rank_0").write_bytes(pickle.dumps(dump))
    default = fr.analyze(fr.read_dir(tmp_path))["groups"][0]
    assert default["group"] == "0" and default["no_dump"] == [1] and not default["missing"]
    assert "no dump from member rank(s) 1" in "\n".join(fr.report(fr.analyze(fr.read_dir(tmp_path))))
