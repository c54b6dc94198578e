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
    """Format 3: each tensor on a thread of its own, named by metadata lines; a B at submission
    (the slice opens with the tensor's args), an E at completion (the step, or the error); the
    phases between are the response's."""
    lb = L.LineBuilder(0)
    neg = v.negotiate_name(v.ALLREDUCE)
    other_shape = (v.ALLREDUCE, 64, "float32", (16,), "Sum", 0)
    for step, info in ((3, INFO), (4, INFO), (5, other_shape), (6, INFO)):
        begin = _parse(lb.tensor_begin(ODD, neg, 1_000, info, step))
        assert [(e["name"], e["ph"], e["ts"], e["tid"]) for e in begin] == [
            (ODD, "B", 1.0, v.TID_TENSOR_BASE)]
        assert begin[0]["args"] == {"op": info[0], "bytes": info[1], "dtype": info[2],
                                    "shape": list(info[3]), "reduce_op": info[4],
                                    "process_set": info[5], "step": step}
    many = _parse(lb.tensor_begins([(ODD, neg, 5_000, 7, INFO), ("b", neg, 6_000, 7, INFO)], 1_000))
    assert [(e["name"], e["ts"], e["tid"]) for e in many] == [
        (ODD, 4.0, v.TID_TENSOR_BASE), ("b", 5.0, v.TID_TENSOR_BASE + 1)]
    ends = _parse(lb.tensor_ends([(ODD, 4_000, None), ("b", 5_000, "x")], 1_000, 7))
    assert [(e["name"], e["ph"], e["ts"], e["tid"]) for e in ends] == [
        (ODD, "E", 3.0, v.TID_TENSOR_BASE), ("b", "E", 4.0, v.TID_TENSOR_BASE + 1)]
    assert [e["args"] for e in ends] == [{"step": 7}, {"step": 7, v.ARG_ERROR: "x"}]
    end = _parse(lb.tensor_end("never seen", 4_000, 3, None))   # no cached text: made on the spot
    assert [(e["name"], e["ph"], e["ts"], e["tid"]) for e in end] == [
        ("never seen", "E", 4.0, v.TID_TENSOR_BASE + 2)]
    assert all(e["cat"] == v.CAT_TENSOR for e in begin + many + ends + end)
    meta = _parse(",\n".join(lb.take_threads()))
    assert [(e["name"], e["tid"], e["args"]) for e in meta] == [
        ("thread_name", 1000, {"name": ODD}), ("thread_sort_index", 1000, {"sort_index": 1000}),
        ("thread_name", 1001, {"name": "b"}), ("thread_sort_index", 1001, {"sort_index": 1001}),
        ("thread_name", 1002, {"name": "never seen"}),
        ("thread_sort_index", 1002, {"sort_index": 1002})]
    assert lb.take_threads() == []   # given once


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
