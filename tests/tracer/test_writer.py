"""The writer: valid JSON after every flush, crash repair, drops, windows, caps, DYNAMIC, nesting,
and no torn line when many threads record through flushes and rotation."""
from __future__ import annotations

import json
import os
import threading

import pytest

import tracer
from tests.tracer.conftest import Op, events, load
from tests.tracer.readback import read_trace, repair_text
from tracer import vocab as v


def _tensor_op(rec, name, nbytes=64):
    """One op through the contract: submitted, run in a response with nested backend spans, done."""
    op = Op(rec, name, rec.now(), rec.step, nbytes=nbytes) if rec.enabled else None
    with rec.span(v.TID_FUSION, v.FUSED_RESPONSE, v.CAT_FUSION, {v.ARG_TENSORS: [name]}):
        tok = rec.begin(v.TID_BACKEND, v.RING_ALLREDUCE, v.CAT_COMM, {v.ARG_BYTES: nbytes})
        inner = rec.begin(v.TID_BACKEND, v.RING_REDUCE_SCATTER, v.CAT_COMM)
        rec.end(inner)
        rec.end(tok, {v.ARG_RESPONSE: 1})
    if op is not None:
        op.stamp[0].ops_done([op], rec.now())


def test_valid_json_after_every_flush(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0, "size": 1})
    seen = 0
    for i in range(5):
        _tensor_op(rec, f"allreduce.t{i}")
        rec.counter(v.COUNTER_QUEUE_DEPTH, i)
        assert rec.flush()
        doc = load(rec.path)                      # json.loads of the raw file must succeed
        n = len(doc["traceEvents"])
        assert n > seen
        seen = n
        assert doc["otherData"]["ringscope"]["rank"] == 0
    tracer.close()
    shut = events(rec.path, name=v.SHUTDOWN)
    assert len(shut) == 1 and shut[0]["args"]["events_written"] == seen - 12  # 12 metadata events
    assert shut[0]["args"]["events_dropped"] == 0


def test_meta_keys_and_run_meta_update(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path / "t.json"))
    rec = tracer.configure({"rank": 0, "size": 4, "backend": "ring"})
    rec.set_clock_offset(-1500, 40, "init")
    rec.set_run_meta(fusion_threshold=1 << 20)
    rec.set_clock_offset(-1700, 50, "shutdown")
    tracer.close()
    doc = load(rec.path)
    meta = doc["otherData"]["ringscope"]
    assert set(v.META_KEYS) <= set(meta)
    assert (meta["clock_offset_ns"], meta["clock_offset_uncertainty_ns"]) == (-1500, 40)
    assert meta["fusion_threshold"] == 1 << 20 and meta["backend"] == "ring"
    assert isinstance(meta["base_epoch_ns"], int) and meta["base_epoch_ns"] > 1.6e18
    assert meta["cpus"] == len(os.sched_getaffinity(0)) == len(meta["cpu_set"])
    shut = [e for e in doc["traceEvents"] if e["name"] == v.SHUTDOWN][0]["args"]
    assert (shut["clock_offset_ns"], shut["clock_offset_uncertainty_ns"]) == (-1700, 50)


def test_process_and_thread_metadata(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 5, "size": 8, "host": "nodeA"})
    tracer.close()
    m = events(rec.path, ph="M")
    assert {e["pid"] for e in m} == {5}
    pname = [e for e in m if e["name"] == "process_name"][0]["args"]["name"]
    assert pname == "rank 5 (nodeA)"
    assert [e for e in m if e["name"] == "process_sort_index"][0]["args"]["sort_index"] == 5
    tnames = {e["tid"]: e["args"]["name"] for e in m if e["name"] == "thread_name"}
    assert tnames == v.THREAD_NAMES


def test_nested_spans_nest_exactly_and_carry_step(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0})
    tracer.mark_step()
    tracer.mark_step()
    for i in range(50):
        _tensor_op(rec, f"allreduce.t{i}")
    tracer.close()
    xs = events(rec.path, ph="X")
    outer = [e for e in xs if e["name"] == v.RING_ALLREDUCE]
    inner = [e for e in xs if e["name"] == v.RING_REDUCE_SCATTER]
    assert len(outer) == len(inner) == 50
    for o, i in zip(outer, inner):
        assert o["ts"] <= i["ts"] and i["ts"] + i["dur"] <= o["ts"] + o["dur"] + 1e-9
        assert o["args"][v.ARG_STEP] == 1 and o["args"][v.ARG_RESPONSE] == 1
    for e in xs:
        assert round(e["ts"], 3) == e["ts"]        # µs with at most 3 decimals
    steps = [e for e in xs if e["name"] == v.STEP]
    assert [e["args"]["step"] for e in steps] == [0]


def test_truncated_file_repairs_up_to_last_complete_line(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0})
    for i in range(20):
        _tensor_op(rec, f"allreduce.t{i}")
    tracer.close()
    raw = rec.path.read_text()
    full = json.loads(raw)["traceEvents"]
    lines = raw.split("\n")
    # Cut the file at every point inside the event section: a mid-write crash.
    start = raw.index('"traceEvents": [') + 20
    for cut in range(start, len(raw) - 4, 97):
        text = raw[:cut]
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)
        doc = json.loads(repair_text(text))
        got = doc["traceEvents"]
        complete_lines = text.count("\n") - 2          # head line + "traceEvents" line
        assert len(got) == max(0, min(complete_lines, len(full)))
        assert got == full[:len(got)]
    cut_file = tmp_path / "cut.json"
    cut_file.write_text(raw[: len(raw) // 2])
    data = read_trace(cut_file)
    assert data.repaired and data.meta["rank"] == 0 and data.events == full[:len(data.events)]
    assert len(lines) > 10


def test_full_buffer_drops_and_counts(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_BUFFER_EVENTS=10,
        RINGSCOPE_TIMELINE_FLUSH_S=1.0)
    rec = tracer.configure({"rank": 0})
    for i in range(1000):                      # far faster than the writer's first wake-up (1 s)
        rec.instant(v.TID_FRAMEWORK, v.STALL, v.CAT_FRAMEWORK, {"i": i})
    assert rec.events_dropped() == 990
    tracer.close()
    assert len(events(rec.path, name=v.STALL)) == 10
    assert events(rec.path, name=v.SHUTDOWN)[0]["args"]["events_dropped"] == 990
    counters = events(rec.path, ph="C", name=v.COUNTER_EVENTS_DROPPED)
    assert counters and counters[-1]["args"]["value"] == 990


def test_window_of_steps_records_only_inside(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_STEPS="3-5")
    rec = tracer.configure({"rank": 0})
    for step in range(8):
        tracer.mark_step()
        _tensor_op(rec, f"allreduce.s{step}")
    rec.writer.join(5)                             # the window's end finished the file
    assert not rec.writer.alive
    doc = load(rec.path)                           # finished without close()
    assert doc["otherData"]["ringscope"]["steps_window"] == [3, 5]
    data = [e for e in doc["traceEvents"] if e["ph"] != "M" and e["name"] != v.SHUTDOWN]
    assert {e["args"]["step"] for e in data} == {3, 4}
    assert sorted(e["name"] for e in data if e["ph"] == "X" and e["cat"] == "tensor") == \
        ["allreduce.s3", "allreduce.s4"]
    assert [e["args"]["step"] for e in data if e["name"] == v.STEP] == [3, 4]
    assert len([e for e in doc["traceEvents"] if e["name"] == v.SHUTDOWN]) == 1


def test_cap_stop_says_so_in_the_file(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_MAX_MB=0.02)
    rec = tracer.configure({"rank": 0})
    for i in range(400):
        _tensor_op(rec, f"allreduce.t{i}")
    tracer.close()
    assert rec.path.stat().st_size <= 0.02 * 1024 * 1024
    doc = load(rec.path)
    cap = [e for e in doc["traceEvents"] if e["name"] == v.CAP_REACHED]
    assert len(cap) == 1 and cap[0]["args"]["mode"] == "stop"
    shut = [e for e in doc["traceEvents"] if e["name"] == v.SHUTDOWN][0]["args"]
    assert shut["events_capped"] > 0
    assert doc["traceEvents"][-1]["name"] == v.SHUTDOWN and doc["traceEvents"][-2] is cap[0]


def test_cap_rotate_keeps_newest_parts(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_MAX_MB=0.02,
        RINGSCOPE_TIMELINE_CAP_MODE="rotate", RINGSCOPE_TIMELINE_KEEP_PARTS=2)
    rec = tracer.configure({"rank": 0})
    for i in range(600):
        _tensor_op(rec, f"allreduce.t{i}")
        if i % 100 == 0:
            rec.flush()
    tracer.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 2 and all(f.startswith("rank-00000.part") for f in files), files
    parts = [load(tmp_path / f) for f in files]
    assert [d["otherData"]["ringscope"]["part"] for d in parts] == [int(f[15:19]) for f in files]
    first = [e for e in parts[0]["traceEvents"] if e["name"] == v.CAP_REACHED][0]
    assert first["args"]["next_file"] == files[1]
    assert any(e["name"] == v.SHUTDOWN for e in parts[1]["traceEvents"])
    for d in parts:
        assert d["otherData"]["ringscope"]["base_epoch_ns"] == parts[0]["otherData"]["ringscope"][
            "base_epoch_ns"]


def test_every_rotated_part_names_the_tensor_threads_it_uses(env, tmp_path):
    """A tensor's thread is named once per file: a new part repeats the names known so far."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_MAX_MB=0.02,
        RINGSCOPE_TIMELINE_CAP_MODE="rotate", RINGSCOPE_TIMELINE_KEEP_PARTS=3)
    rec = tracer.configure({"rank": 0})
    for i in range(300):
        t0 = rec.now()
        rec.ops_done([Op(rec, n, t0, 3) for n in (f"grad.{i % 7}", f"grad.once{i}")], t0 + 3)
        if i % 50 == 0:
            rec.flush()
    tracer.close()
    parts = [load(p) for p in sorted(tmp_path.iterdir())]
    with_life = 0
    for d in parts:
        evs = d["traceEvents"]
        named = {e["tid"]: e["args"]["name"] for e in evs if e["name"] == "thread_name"}
        life = [e for e in evs if e.get("cat") == v.CAT_TENSOR]
        with_life += bool(life)
        assert all(named[e["tid"]] == e["name"] for e in life)
        assert len(named) == len(set(named.values()))   # one thread per name
    assert len(parts) == 3 and with_life >= 2, [len(d["traceEvents"]) for d in parts]


def test_dynamic_start_stop_records_only_inside_window(env, tmp_path):
    env(RINGSCOPE_TIMELINE="DYNAMIC")
    rec0 = tracer.configure({"rank": 1, "size": 2})
    _tensor_op(rec0, "allreduce.before")                              # before: not recorded
    tracer.mark_step()
    rec = tracer.start_timeline(str(tmp_path) + "/", mark_cycles=True)
    assert rec is tracer.get_recorder() and rec.mark_cycles and rec.step == 0
    _tensor_op(rec, "allreduce.inside")
    tracer.stop_timeline()
    after = tracer.get_recorder()
    assert not after.enabled
    _tensor_op(after, "allreduce.after")
    path = tmp_path / "rank-00001.json"
    names = {e["name"] for e in load(path)["traceEvents"]}
    assert "allreduce.inside" in names
    assert not {"allreduce.before", "allreduce.after"} & names
    # a second window goes to a fresh file
    rec2 = tracer.start_timeline(str(tmp_path / "second.json"))
    _tensor_op(rec2, "allreduce.again")
    tracer.stop_timeline()
    assert "allreduce.again" in {e["name"] for e in load(tmp_path / "second.rank-00001.json")[
        "traceEvents"]}


def test_an_op_stamped_by_a_stopped_timeline_is_not_written_anywhere(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    first = tracer.configure({"rank": 0, "size": 1})
    op = Op(first, "grad.old", first.now(), 0)
    second = tracer.start_timeline(str(tmp_path / "second.json"))
    assert first.closed and second.ops_done([op], second.now()) == [op]
    assert first.ops_done([op], second.now()) is None      # closed: writes nothing
    tracer.close()
    for path in (first.path, second.path):
        assert not [e for e in events(path) if e.get("cat") == v.CAT_TENSOR]


def test_many_threads_through_flushes_and_rotation_never_tear_a_line(env, tmp_path):
    """Issue #27's writer race: 8 threads record spans, instants, counters and ops while the writer
    flushes and rotates; every part is strict JSON after every flush, and every event recorded is
    in some part exactly once (none dropped, none torn)."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_MAX_MB=0.25,
        RINGSCOPE_TIMELINE_CAP_MODE="rotate", RINGSCOPE_TIMELINE_KEEP_PARTS=1000,
        RINGSCOPE_TIMELINE_FLUSH_S=0.01)
    rec = tracer.configure({"rank": 0, "size": 1})
    per_thread, threads, stop = 1500, 8, threading.Event()

    def work(k):
        for i in range(per_thread):
            tag = f"t{k}.{i}"
            with rec.span(v.TID_BACKEND, v.RING_ALLREDUCE, v.CAT_COMM, {"tag": tag}):
                rec.instant(v.TID_NEGOTIATION, v.STALL, v.CAT_NEGOTIATION, {"tag": tag})
            rec.counter(f"c{k}", i)
            rec.ops_done([Op(rec, f"grad.{k}.{i % 50}", rec.now(), i)], rec.now())
            if i % 10 == 0:
                rec.ready([tag, tag + "\n\"x\""], k, 0, rec.now())

    def check_while_running():
        while not stop.is_set():
            rec.flush()
            for p in sorted(tmp_path.iterdir()):
                json.loads(p.read_text())   # strict: a torn line fails here

    checker = threading.Thread(target=check_while_running)
    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    checker.start()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    checker.join()
    tracer.close()
    evs, parts = [], sorted(tmp_path.iterdir())
    for p in parts:
        evs += json.loads(p.read_text())["traceEvents"]
    assert len(parts) > 3
    tags = [e["args"]["tag"] for e in evs if e["name"] in (v.RING_ALLREDUCE, v.STALL)]
    want = {f"t{k}.{i}" for k in range(threads) for i in range(per_thread)}
    assert len(tags) == 2 * len(want) and set(tags) == want
    counters = [(e["name"], e["args"]["value"]) for e in evs if e["ph"] == "C"]
    assert sorted(counters) == sorted((f"c{k}", i) for k in range(threads)
                                      for i in range(per_thread))
    ops = [e for e in evs if e.get("cat") == v.CAT_TENSOR]
    assert len(ops) == threads * per_thread and {e["ph"] for e in ops} == {"X"}
    assert len([e for e in evs if e["name"] == v.READY]) == threads * per_thread // 10
    shut = [e for e in evs if e["name"] == v.SHUTDOWN][0]["args"]
    assert shut["events_dropped"] == 0 and shut["events_capped"] == 0
    # every line after the parts' heads (cap notes and tensor threads' names included) but SHUTDOWN
    assert shut["events_written"] == len(
        [e for e in evs if e["ph"] != "M" or e["tid"] >= v.TID_TENSOR_BASE]) - 1
