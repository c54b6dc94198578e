"""Issue 4's multi-rank checks: 4 real ranks (mpiexec), the real engine, the timeline on every rank."""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.mpi_util import SCRIPTS, mpi_env, mpiexec, run_mpi
from tests.tracer.readback import read_trace
from tracer import clock
from tracer import vocab as v

N = 4
SKEW_RANK, SKEW_US = 2, 50_000
SCRIPT = SCRIPTS / "tracer_timeline_run.py"
NVTX_LOGS: dict = {}   # rank -> the NVTX calls its runtime made (filled by the run fixture)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("tracer_mr")
    proc = run_mpi(N, [SCRIPT, "steps", "25"], env={
        "RESULTS_DIR": d, "RINGSCOPE_TIMELINE": str(d / "tl") + "/", "RINGSCOPE_NVTX_ALWAYS": "1",
        "TRACER_TEST_SKEW": f"{SKEW_RANK}:{SKEW_US}"}, timeout=240)
    assert proc.returncode == 0, proc.stdout[-4000:]
    docs = {}
    for r in range(N):
        with open(d / "tl" / f"rank-{r:05d}.json") as f:
            docs[r] = json.loads(f.read())        # plain json.loads: no repair needed
    submitted = {r: json.loads((d / f"submitted-{r}.json").read_text()) for r in range(N)}
    NVTX_LOGS.update({r: json.loads((d / f"nvtx-{r}.json").read_text()) for r in range(N)})
    return docs, submitted


def test_four_files_one_per_rank(run):
    docs, _ = run
    assert sorted(docs) == list(range(N))
    for r, doc in docs.items():
        meta = doc["otherData"]["ringscope"]
        assert meta["rank"] == r and meta["size"] == N
        assert {e["pid"] for e in doc["traceEvents"]} == {r}
        assert doc["traceEvents"][-1]["name"] == v.SHUTDOWN


def test_every_tensor_of_every_fused_op_appears(run):
    docs, submitted = run
    for r, doc in docs.items():
        evs = doc["traceEvents"]
        lifecycles = defaultdict(int)
        for e in evs:
            if e.get("cat") == v.CAT_TENSOR and e["ph"] in ("X", "B"):
                lifecycles[e["name"]] += 1
        fused = [e for e in evs if e["name"] == v.FUSED_RESPONSE]
        assert fused and any(e["args"][v.ARG_COUNT] > 1 for e in fused), "nothing was fused"
        in_fused = defaultdict(int)
        for e in fused:
            assert len(e["args"][v.ARG_TENSORS]) == e["args"][v.ARG_COUNT]
            for t in e["args"][v.ARG_TENSORS]:
                in_fused[t] += 1
        assert set(in_fused) == set(submitted[r]) == set(lifecycles)
        assert in_fused == lifecycles       # each executed tensor has exactly one lifecycle per step


def _ns(x):
    return round(x * 1000)


def test_no_complete_events_overlap_without_nesting(run):
    docs, _ = run
    for r, doc in docs.items():
        by_thread, opened = defaultdict(list), defaultdict(list)
        for e in doc["traceEvents"]:
            if e["ph"] == "X":
                by_thread[e["tid"]].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), e["name"]))
            elif e["ph"] == "B":   # a lifecycle written before it ended (on its tensor's thread)
                opened[e["tid"]].append((_ns(e["ts"]), e["name"]))
            elif e["ph"] == "E":
                t0, name = opened[e["tid"]].pop()
                by_thread[e["tid"]].append((t0, _ns(e["ts"]), name))
        assert len(by_thread) >= 3 and any(tid >= v.TID_TENSOR_BASE for tid in by_thread)
        for tid, spans in by_thread.items():
            spans.sort(key=lambda s: (s[0], -s[1]))
            stack = []
            for s in spans:
                while stack and stack[-1][1] <= s[0]:
                    stack.pop()
                assert not stack or s[1] <= stack[-1][1], f"rank {r} tid {tid}: {s} overlaps {stack[-1]}"
                stack.append(s)


def _comm_ends(doc, use_offset):
    meta = doc["otherData"]["ringscope"]
    off = meta["clock_offset_ns"] if use_offset else 0
    return {e["args"][v.ARG_RESPONSE]: meta["base_epoch_ns"] + _ns(e["ts"] + e["dur"]) - off
            for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] in v.COMM_ACTIVITIES}


def test_recorded_offsets_line_ranks_up(run):
    """The recorded clock offsets are the clocks' true offsets within their recorded uncertainty (half the best
    ping-pong round trip): the injected skew on one rank, none on the others, which share rank 0's clock. With
    them, the skewed rank ends the same collectives as rank 0 does within what this run itself measured: the
    uncertainty, the spread (interquartile range) of its end differences, which load widens, and how far apart
    the unskewed ranks end them on the one clock (ranks sharing cores finish a collective in turn)."""
    docs, _ = run
    ref = _comm_ends(docs[0], True)
    assert len(ref) >= 25

    def diffs(r, use_offset):
        ends = _comm_ends(docs[r], use_offset)
        assert sorted(set(ends) & set(ref)) == sorted(ref), "the same response ids on every rank"
        return [(ends[k] - ref[k]) / 1000 for k in sorted(ref)]

    natural_us = 0.0
    for r in range(1, N):
        meta = docs[r]["otherData"]["ringscope"]
        unc = meta["clock_offset_uncertainty_ns"]
        true_ns = SKEW_US * 1000 if r == SKEW_RANK else 0   # one host: the injected skew is the true offset
        assert abs(meta["clock_offset_ns"] - true_ns) <= unc + 1, (r, meta["clock_offset_ns"], unc)
        if r != SKEW_RANK:
            natural_us = max(natural_us, abs(statistics.median(diffs(r, True))))
    unc_us = docs[SKEW_RANK]["otherData"]["ringscope"]["clock_offset_uncertainty_ns"] / 1000
    for use_offset in (True, False):
        d = diffs(SKEW_RANK, use_offset)
        q1, _, q3 = statistics.quantiles(d, n=4)
        bound_us = unc_us + (q3 - q1) + natural_us
        median_us = statistics.median(d)
        if use_offset:
            assert abs(median_us) <= bound_us, f"rank {SKEW_RANK}: collectives {median_us:.0f} µs apart " \
                                               f"(bound {bound_us:.0f} µs)"
        else:   # the control: without the offsets the skew shows (as measured)
            assert abs(median_us - SKEW_US) <= bound_us + unc_us, (median_us, bound_us)


def test_sigkilled_rank_leaves_a_loadable_file(tmp_path):
    env = mpi_env({"RESULTS_DIR": tmp_path, "RINGSCOPE_TIMELINE": str(tmp_path / "tl") + "/"})
    cmd = [mpiexec(), "-n", str(N), sys.executable, str(SCRIPT), "forever"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    victim = 1
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / f"ready-{victim}").exists():
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "workers never got ready"
            time.sleep(0.2)
        pid = int((tmp_path / f"pid-{victim}").read_text())
        killed_at = clock.wall_ns()
        os.kill(pid, signal.SIGKILL)
        try:
            proc.communicate(timeout=60)     # the other ranks must not hang
        except subprocess.TimeoutExpired:
            pytest.fail("other ranks hung after a rank was SIGKILLed")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    data = read_trace(tmp_path / "tl" / f"rank-{victim:05d}.json")
    base = data.meta["base_epoch_ns"]
    assert data.meta["rank"] == victim
    ts = [e["ts"] for e in data.events if e["ph"] != "M"]
    assert len(ts) > 100
    last_ns = base + _ns(max(ts))
    lost_s = (killed_at - last_ns) / 1e9
    assert lost_s < 1.25, f"rank {victim}'s file ends {lost_s:.2f}s before the kill"
    assert not any(e["name"] == v.SHUTDOWN for e in data.events)   # it really died unfinished


def test_perfetto_loads_the_engine_traces_cleanly(run, tmp_path):
    from tests.tracer.perfetto_util import chromium_missing_reason, perfetto
    reason = chromium_missing_reason()
    if reason:
        pytest.skip(f"Perfetto check needs: {reason}")
    docs, _ = run
    # All four ranks in one file: pids keep ranks apart, process-scoped async ids keep tensors apart.
    merged = tmp_path / "all_ranks.json"
    merged.write_text(json.dumps({"traceEvents": [e for r in range(N) for e in docs[r]["traceEvents"]]}))
    artifacts = Path(__file__).resolve().parents[2] / "test-artifacts"
    with perfetto(merged, artifacts / "tracer_perfetto_4ranks.png") as ui:
        assert ui.problems == [], f"Perfetto import problems: {ui.problems}"


def test_runtime_spans_are_nvtx_ranges_too(run):
    """NVTX over the same calls: every FUSED_RESPONSE, backend and SYNCHRONIZE span the runtime
    recorded in the steps is also a range, closed, with the span's byte count; STEP n per step."""
    docs, _ = run
    assert sorted(NVTX_LOGS) == list(range(N))
    for r, log in NVTX_LOGS.items():
        ended = {e[1] for e in log if e[0] == "end"}
        starts = [e for e in log if e[0] == "start"]
        assert [e[3] for e in starts if e[1] not in ended] == [v.STEP], f"rank {r}"
        assert [e[4] for e in starts if e[3] == v.STEP] == [f"STEP {i}" for i in range(26)]
        xs = [e for e in docs[r]["traceEvents"] if e["ph"] == "X"]
        for name in (v.FUSED_RESPONSE, v.SYNCHRONIZE, v.RING_ALLREDUCE):
            ranges = [e for e in starts if e[3] == name]
            spans = [e for e in xs if e["name"] == name]
            # the log was saved before shutdown: its ranges are the first spans of the trace
            assert 0 < len(ranges) <= len(spans), (r, name, len(ranges), len(spans))
        fused = {e[5] for e in starts if e[3] == v.FUSED_RESPONSE}
        assert fused <= {e["args"][v.ARG_BYTES] for e in xs if e["name"] == v.FUSED_RESPONSE}
