"""The line builder writes exactly the events the trace format describes, escaping odd names,
and its caches of constant text never leak one event's text into another's."""
import json

from tracer import lines as L
from tracer import vocab as v

ODD = 'odd "name" },{"name": x\n\\ é'
INFO = (v.ALLREDUCE, 64, "float32", (4, 4), "Sum", 0)   # op, bytes, dtype, shape, reduce_op, set


def _parse(text: str) -> list:
    return json.loads("[" + text + "]")


def test_complete_instant_counter_ready():
    lb = L.LineBuilder(3)
    args = L.jargs({"tensor": ODD, "shape": [3, 4], "bytes": 48}, 2, {"response": 7})
    (x,) = _parse(lb.complete(v.RING_ALLREDUCE, v.CAT_COMM, v.TID_BACKEND, 1_000, 9_001, args))
    assert x == {"name": v.RING_ALLREDUCE, "cat": v.CAT_COMM, "ph": "X", "pid": 3, "tid": 4,
                 "ts": 1.0, "dur": 8.001,
                 "args": {"tensor": ODD, "shape": [3, 4], "bytes": 48, "response": 7, "step": 2}}
    (i,) = _parse(lb.instant(ODD, v.CAT_NEGOTIATION, v.TID_NEGOTIATION, 123_456_789,
                             L.jargs(None, 5)))
    assert i == {"name": ODD, "cat": v.CAT_NEGOTIATION, "ph": "i", "pid": 3, "tid": 2,
                 "ts": 123456.789, "s": "t", "args": {"step": 5}}
    for value in (17, 2.5):
        (c,) = _parse(lb.counter(v.COUNTER_QUEUE_DEPTH, -2_500, value))
        assert c == {"name": v.COUNTER_QUEUE_DEPTH, "cat": v.CAT_COUNTER, "ph": "C", "pid": 3,
                     "tid": 0, "ts": -2.5, "args": {"value": value}}
    for name in (ODD, "fresh"):   # READY with and without the tensor's cached text
        lb.tensor_begin(ODD, "NEGOTIATE_ALLREDUCE", 0, INFO, 0)
        (r,) = _parse(lb.ready(name, 2, 1, 4_000, 6))
        assert r == {"name": v.READY, "cat": v.CAT_NEGOTIATION, "ph": "i", "pid": 3, "tid": 2,
                     "ts": 4.0, "s": "t",
                     "args": {"rank": 2, "step": 6, "process_set": 1, "tensors": [name]}}
    assert L.jargs({"step": 9}, 2) == '{"step":9}'   # the caller's step wins


def test_tensor_lifecycle_lines():
    """Format 2: one line at submission (the slice opens with the tensor's args), one at
    completion (the step, or the error); the phases between are the response's."""
    lb = L.LineBuilder(0)
    neg = v.negotiate_name(v.ALLREDUCE)
    other_shape = (v.ALLREDUCE, 64, "float32", (16,), "Sum", 0)
    for step, info in ((3, INFO), (4, INFO), (5, other_shape), (6, INFO)):
        begin = _parse(lb.tensor_begin(ODD, neg, 1_000, info, step))
        assert [(e["name"], e["ph"], e["ts"], e["id2"]["local"]) for e in begin] == [
            (ODD, "b", 1.0, ODD)]
        assert begin[0]["args"] == {"tensor": ODD, "op": info[0], "bytes": info[1],
                                    "dtype": info[2], "shape": list(info[3]),
                                    "reduce_op": info[4], "process_set": info[5], "step": step}
    many = _parse(lb.tensor_begins([(ODD, neg, 5_000, 7, INFO), ("b", neg, 6_000, 7, INFO)], 1_000))
    assert [(e["id2"]["local"], e["ts"]) for e in many] == [(ODD, 4.0), ("b", 5.0)]
    ends = _parse(lb.tensor_ends([(ODD, 4_000, None), ("b", 5_000, "x")], 1_000, 7))
    assert [(e["id2"]["local"], e["name"], e["ph"], e["ts"]) for e in ends] == [
        (ODD, ODD, "e", 3.0), ("b", "b", "e", 4.0)]
    assert [e["args"] for e in ends] == [{"step": 7}, {v.ARG_ERROR: "x", "step": 7}]
    end = _parse(lb.tensor_end("never seen", 4_000, 3, None))   # no cached text: made on the spot
    assert [(e["name"], e["ph"], e["ts"], e["id2"]["local"]) for e in end] == [
        ("never seen", "e", 4.0, "never seen")]
    assert all(e["cat"] == v.CAT_TENSOR and e["tid"] == v.TID_FRAMEWORK
               for e in begin + many + ends + end)


def test_tensor_span():
    lb = L.LineBuilder(1)
    for tensor in ("fresh", ODD):
        lb.tensor_begin(ODD, "NEGOTIATE_ALLREDUCE", 0, INFO, 0)
        (x,) = _parse(lb.tensor_span(v.SYNCHRONIZE, v.CAT_FRAMEWORK, v.TID_FRAMEWORK, tensor,
                                     5_000, 7_500, 8))
        assert x == {"name": v.SYNCHRONIZE, "cat": v.CAT_FRAMEWORK, "ph": "X", "pid": 1, "tid": 1,
                     "ts": 5.0, "dur": 2.5, "args": {"tensor": tensor, "step": 8}}


def test_ready_many_is_one_line_per_rank_and_process_set():
    lb = L.LineBuilder(0)
    ticks = [("a", 0, 0), (ODD, 0, 0), ("b", 1, 2), ("c", 1, 2), ("d", 0, 0)]
    lines = _parse(lb.ready_many(ticks, 9_000, 4))
    assert [(e["args"]["rank"], e["args"]["process_set"], e["args"]["tensors"]) for e in lines] == [
        (0, 0, ["a", ODD]), (1, 2, ["b", "c"]), (0, 0, ["d"])]
    assert lines[0] == _parse(lb.ready_many(ticks[:2], 9_000, 4))[0]
