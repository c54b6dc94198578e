"""The writer: valid JSON after every flush, crash repair, drops, windows, caps, DYNAMIC, nesting."""
from __future__ import annotations

import json

import pytest

import tracer
from tests.tracer.conftest import events, load
from tracer import vocab as v
from tracer.readback import read_trace, repair_text


def _tensor_op(rec, name, nbytes=64):
    rec.instant(v.TID_FRAMEWORK, v.SUBMIT, v.CAT_FRAMEWORK, {v.ARG_TENSOR: name})
    rec.async_begin(name, name, {v.ARG_TENSOR: name, v.ARG_BYTES: nbytes})
    rec.async_begin(name, v.negotiate_name(v.ALLREDUCE))
    rec.async_end(name, v.negotiate_name(v.ALLREDUCE))
    tok = rec.begin(v.TID_BACKEND, v.RING_ALLREDUCE, v.CAT_COMM, {v.ARG_BYTES: nbytes})
    inner = rec.begin(v.TID_BACKEND, v.RING_REDUCE_SCATTER, v.CAT_COMM)
    rec.end(inner)
    rec.end(tok, {v.ARG_RESPONSE: 1})
    rec.async_end(name, name)


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
    for e in xs + events(rec.path, ph="b"):
        assert round(e["ts"], 3) == e["ts"]        # µs with at most 3 decimals
    steps = [e for e in xs if e["name"] == v.STEP]
    assert [e["args"]["step"] for e in steps] == [0]


def test_async_events_use_process_scoped_id(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0})
    _tensor_op(rec, "allreduce.w")
    tracer.close()
    bs = events(rec.path, ph="b")
    assert [e["name"] for e in bs] == ["allreduce.w", "NEGOTIATE_ALLREDUCE"]
    assert all(e["cat"] == "tensor" and e["id2"] == {"local": "allreduce.w"} and "id" not in e
               for e in bs)
    assert v.async_id(bs[0]) == "allreduce.w" and v.async_id({"id": "x"}) == "x"


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
        rec.instant(v.TID_FRAMEWORK, v.SUBMIT, v.CAT_FRAMEWORK, {"i": i})
    assert rec.events_dropped() == 990
    tracer.close()
    assert len(events(rec.path, name=v.SUBMIT)) == 10
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
    assert sorted(e["name"] for e in data if e["ph"] == "b" and e["cat"] == "tensor"
                  and e["name"].startswith("allreduce")) == ["allreduce.s3", "allreduce.s4"]
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
    neg, info = v.negotiate_name(v.ALLREDUCE), (v.ALLREDUCE, 8, "float32", (2,), "Sum", 0)
    for i in range(300):
        t0 = rec.now()
        names = [f"grad.{i % 7}", f"grad.once{i}"]
        rec.tensors_begin([(n, neg, t0, 3, info) for n in names])
        rec.tensors_end([(n, neg, t0 + 1, t0 + 2, t0 + 3, None) for n in names])
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
    rec0.async_begin("allreduce.before", "allreduce.before")          # before: not recorded
    tracer.mark_step()
    rec = tracer.start_timeline(str(tmp_path) + "/", mark_cycles=True)
    assert rec is tracer.get_recorder() and rec.mark_cycles and rec.step == 0
    rec.async_end("allreduce.before", "allreduce.before")             # its begin is not in the file
    _tensor_op(rec, "allreduce.inside")
    tracer.stop_timeline()
    after = tracer.get_recorder()
    assert not after.enabled
    _tensor_op(after, "allreduce.after")
    path = tmp_path / "rank-00001.json"
    names = {e["name"] for e in load(path)["traceEvents"]}
    assert "allreduce.inside" in names
    assert not {"allreduce.before", "allreduce.after"} & names
    shut = events(path, name=v.SHUTDOWN)[0]["args"]
    assert shut["unmatched_async_ends"] == 1
    # a second window goes to a fresh file
    rec2 = tracer.start_timeline(str(tmp_path / "second.json"))
    _tensor_op(rec2, "allreduce.again")
    tracer.stop_timeline()
    assert "allreduce.again" in {e["name"] for e in load(tmp_path / "second.rank-00001.json")[
        "traceEvents"]}


def test_tensor_spans_and_lifecycle_reach_the_file(env, tmp_path):
    """The runtime's fast paths: a span about one tensor (formatted later by the writer) and a
    lifecycle in two calls (begin at submission, the rest at completion)."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 2, "size": 4})
    tracer.mark_step(7)
    neg = v.negotiate_name(v.ALLREDUCE)
    t0 = rec.now()
    rec.tensor_begin("grad.w", neg, t0, 6, (v.ALLREDUCE, 64, "float32", (16,), "Sum", 0))
    tok = rec.begin(v.TID_FRAMEWORK, v.SYNCHRONIZE, v.CAT_FRAMEWORK, tensor="grad.w")
    rec.tensor_end("grad.w", neg, t0 + 1000, t0 + 2000, t0 + 3000)
    rec.end(tok)
    rec.tensor_end("grad.never_begun", neg, None, None, t0 + 4000)
    tracer.close()
    evs = events(rec.path)
    sync = [e for e in evs if e["name"] == v.SYNCHRONIZE]
    assert len(sync) == 1 and sync[0]["args"] == {"tensor": "grad.w", "step": 7}
    assert sync[0]["pid"] == 2 and sync[0]["tid"] == v.TID_FRAMEWORK and sync[0]["dur"] >= 0
    life = [(e["name"], e["ph"]) for e in evs if e.get("cat") == v.CAT_TENSOR]
    assert life == [("grad.w", "B"), ("grad.w", "E")]   # the phases between are the response's
    outer = [e for e in evs if e["name"] == "grad.w" and e["ph"] == "B"][0]
    assert outer["args"] == {"op": v.ALLREDUCE, "bytes": 64, "dtype": "float32", "shape": [16],
                             "reduce_op": "Sum", "process_set": 0, "step": 6}
    shut = [e for e in evs if e["name"] == v.SHUTDOWN][0]["args"]
    assert shut["unmatched_async_ends"] == 1 and shut["open_async_at_close"] == 0


def test_lifecycles_in_batches(env, tmp_path):
    """tensors_begin / tensors_end: many lifecycles in one record each way; an end without its begin
    is counted, not written."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0, "size": 1})
    neg, t0 = v.negotiate_name(v.ALLREDUCE), rec.now()
    names = [f"grad.{i}" for i in range(5)]
    info = (v.ALLREDUCE, 8, "float32", (2,), "Sum", 0)
    rec.tensors_begin([(n, neg, t0 + i, 3, info) for i, n in enumerate(names)])
    rec.tensors_end([(n, neg, t0 + 10, t0 + 20, t0 + 30, None) for n in names + ["grad.other"]])
    tracer.close()
    evs = [e for e in events(rec.path) if e.get("cat") == v.CAT_TENSOR]
    assert len(evs) == 2 * len(names)
    threads = {e["tid"]: e["args"]["name"] for e in events(rec.path) if e["name"] == "thread_name"}
    for i, n in enumerate(names):
        life = [e for e in evs if e["name"] == n]
        assert [e["ph"] for e in life] == ["B", "E"] and {threads[e["tid"]] for e in life} == {n}
        assert life[1]["ts"] - life[0]["ts"] == pytest.approx((30 - i) / 1e3)
    shut = [e for e in events(rec.path) if e["name"] == v.SHUTDOWN][0]["args"]
    # events after the head: the lifecycles and the metadata naming their threads (two each)
    assert shut["unmatched_async_ends"] == 1 and shut["events_written"] == 4 * len(names)


def test_dropped_lifecycle_batches_count_their_events_and_take_their_ends(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_BUFFER_EVENTS=1,
        RINGSCOPE_TIMELINE_FLUSH_S=1)
    rec = tracer.configure({"rank": 0})
    neg, t0, info = v.negotiate_name(v.ALLREDUCE), rec.now(), (v.ALLREDUCE, 8, "float32", (2,), "Sum", 0)
    rec.tensors_begin([("a", neg, t0, 0, info)])                       # fills the buffer
    rec.tensors_begin([(n, neg, t0, 0, info) for n in ("b", "c", "d")])  # dropped: 3 events
    rec.tensors_end([(n, neg, t0 + 1, t0 + 2, t0 + 3, None) for n in ("b", "c", "d")])
    assert rec.events_dropped() == 3 and rec.unmatched_ends == 3
    tracer.close()
    names = {e["name"] for e in events(rec.path) if e.get("cat") == v.CAT_TENSOR}
    assert names == {"a"}
