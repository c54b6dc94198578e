"""The C formatter writes, line for line, what the reference formatter (tests/tracer/reference.py)
says each recorder call must write: seeded random calls with every kind of value."""
from __future__ import annotations

import json
import random

import tracer
from tests.tracer import reference as ref
from tests.tracer.conftest import Op, load
from tracer import vocab as v

NAMES = ["grad.a", "grad.b", "ünï\"cödé\\n", "tab\there", "ctl\x01\x1f", "layer.0.weight"]
VALUES = [0, -1, 7, 2**62, 1.5, -0.25, 1e-7, 1e16, True, False, None, "x", "quote\"back\\slash",
          "new\nline", "é✓", [1, "a", None], (2, 3), {"k": [1, {"n": 2}]}, []]


def _args(rnd):
    if rnd.random() < 0.2:
        return None
    a = {f"k{i}": rnd.choice(VALUES) for i in range(rnd.randint(0, 4))}
    if rnd.random() < 0.3:
        a[v.ARG_STEP] = rnd.randint(-1, 9)
    return a


def _body(path) -> list[str]:
    text = path.read_text()
    lines = text.split("\n")[2:-2]     # the head line and "traceEvents": [ ... ]}
    body = [ln[:-1] if ln.endswith(",") else ln for ln in lines]
    return [ln for ln in body if '"name":"process_' not in ln and not (
        '"ph":"M"' in ln and any(f'"tid":{t},' in ln for t in v.THREAD_NAMES))]


def test_c_lines_equal_the_reference(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 3, "size": 4})
    rnd, b, pid, want = random.Random(26), rec.base_ns, 3, []
    tids, inflight = {}, {}
    tracer.recorder.set_inflight(inflight)
    try:
        for i in range(600):
            step, kind, t = rnd.randint(-1, 5), rnd.randrange(6), rnd.randint(-10**6, 10**12)
            rec.step = step
            if kind == 0:
                a, t1 = _args(rnd), t + rnd.randint(0, 10**6)
                name = rnd.choice([v.FUSED_RESPONSE, v.RING_ALLREDUCE, "odd\"name"])
                rec.complete(v.TID_BACKEND, name, v.CAT_COMM, b + t, b + t1, a)
                want.append(ref.x_line(pid, v.TID_BACKEND, name, v.CAT_COMM, t, t1, step, a))
            elif kind == 1:
                a = _args(rnd)
                rec.instant(v.TID_NEGOTIATION, v.STALL, v.CAT_NEGOTIATION, a, ts_ns=b + t)
                want.append(ref.i_line(pid, v.TID_NEGOTIATION, v.STALL, v.CAT_NEGOTIATION, t, step,
                                       a))
            elif kind == 2:
                val = rnd.choice([3, 0, -5, 2.5, 10**15])
                rec.counter(v.COUNTER_QUEUE_DEPTH, val, ts_ns=b + t)
                want.append(ref.c_line(pid, v.COUNTER_QUEUE_DEPTH, t, val))
            elif kind == 3:
                names, rank = rnd.sample(NAMES, rnd.randint(1, 3)), rnd.randint(0, 3)
                rec.ready(names, rank, 1, b + t)
                want.append(ref.ready_line(pid, names, rank, 1, t, step))
            else:
                name = rnd.choice(NAMES)
                if name in inflight:
                    continue
                op = Op(rec, name, b + t, step, nbytes=rnd.randint(0, 10**9),
                        shape=tuple(rnd.randint(1, 9) for _ in range(rnd.randint(0, 3))),
                        priority=rnd.randint(-2, 2))
                if name not in tids:
                    tids[name] = v.TID_TENSOR_BASE + len(tids)
                    want += ref.thread_lines(pid, tids[name], name)
                error = rnd.choice([None, None, "stall: waited 5.0 s"])
                if kind == 5:   # in flight at a flush: its B now, its E at the end
                    inflight[name] = op
                    assert rec.flush()
                    want.append(ref.op_line(pid, tids[name], op.trace_key, "B", t, 0, step))
                    del inflight[name]
                    t1 = t + rnd.randint(0, 10**6)
                    assert rec.ops_done([op], b + t1, error) is None
                    want.append(ref.op_line(pid, tids[name], op.trace_key, "E", t, t1, step, error))
                else:
                    t1 = t + rnd.randint(0, 10**6)
                    assert rec.ops_done([op], b + t1, error) is None
                    want.append(ref.op_line(pid, tids[name], op.trace_key, "X", t, t1, step, error))
            if i % 97 == 0:
                assert rec.flush()
        tracer.close()
    finally:
        tracer.recorder.set_inflight(None)
    got = _body(rec.path)
    assert got[-1].startswith('{"name":"ringscope.shutdown"')
    assert got[:-1] == want


def test_spans_merge_end_args_and_keep_the_begin_step(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0, "size": 1})
    rec.mark_step(4)
    tok = rec.begin(v.TID_FUSION, v.FUSED_RESPONSE, v.CAT_FUSION, {v.ARG_RESPONSE: 1, "a": 1})
    with rec.span(v.TID_BACKEND, v.RING_ALLREDUCE, v.CAT_COMM, {v.ARG_BYTES: 8}):
        rec.mark_step()
    rec.end(tok, {"a": 2, "b": 3})
    late = rec.begin(v.TID_FRAMEWORK, v.SYNCHRONIZE, v.CAT_FRAMEWORK, ts_ns=rec.base_ns + 5)
    rec.end(late)
    tracer.close()
    evs = {e["name"]: e for e in load(rec.path)["traceEvents"] if e["ph"] == "X"}
    assert evs[v.FUSED_RESPONSE]["args"] == {v.ARG_RESPONSE: 1, "a": 2, "b": 3, "step": 4}
    assert evs[v.RING_ALLREDUCE]["args"] == {v.ARG_BYTES: 8, "step": 4}
    assert evs[v.STEP]["args"] == {"step": 4}
    assert evs[v.SYNCHRONIZE]["ts"] == 0.005 and evs[v.SYNCHRONIZE]["args"] == {"step": 5}
    fr, ring = evs[v.FUSED_RESPONSE], evs[v.RING_ALLREDUCE]
    assert fr["ts"] <= ring["ts"] and ring["ts"] + ring["dur"] <= fr["ts"] + fr["dur"]


def test_values_json_cannot_hold_are_written_as_json_can(env, tmp_path):
    """Non-finite floats become null, an int past 64 bits its decimal string, keys that are not
    str go through the serialiser: the file stays valid JSON and nothing is lost."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0, "size": 1})
    rec.instant(v.TID_FRAMEWORK, "odd", v.CAT_FRAMEWORK,
                {"inf": float("inf"), "nan": float("nan"), "big": 2**70, "obj": object})
    rec.instant(v.TID_FRAMEWORK, "keys", v.CAT_FRAMEWORK, {1: "one", (2, 3): "t"})
    rec.counter(v.COUNTER_QUEUE_DEPTH, 2**80)
    tracer.close()
    evs = {e["name"]: e for e in json.loads(rec.path.read_text())["traceEvents"]}
    a = evs["odd"]["args"]
    assert a["inf"] is None and a["nan"] is None and a["big"] == str(2**70) and "object" in a["obj"]
    assert evs["keys"]["args"]["1"] == "one" and evs["keys"]["args"]["step"] == -1
    assert evs[v.COUNTER_QUEUE_DEPTH]["args"]["value"] == str(2**80)
