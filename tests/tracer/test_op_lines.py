"""The op-level line functions: the C build and the pure-Python twin write the same text, which
parses to the events of the trace format; ops of another recorder are handed back untouched."""
import json
import os
import random

import pytest

from tracer import lines as L
from tracer import op_lines
from tracer import op_lines_py as P
from tracer import vocab as v

try:
    from tracer import _oplines as C
except ImportError:   # no compiler where ringscope was installed: only the twin runs
    C = None

needs_c = pytest.mark.skipif(C is None and not os.environ.get("RINGSCOPE_REQUIRE_C"),
                             reason="tracer._oplines is not built (no C compiler at install)")
NAMES = ["grad.w", 'odd "q" },{\n\\ é', "grad.layer3.bias", "ünï"]


class Op:
    def __init__(self, name, stamp, op_type=v.ALLREDUCE, nbytes=64, shape=(4, 4), reduce_op="Sum"):
        """``stamp`` = (recorder, submit_ns, step)."""
        self.name, self.op_type, self.nbytes, self.dtype = name, op_type, nbytes, "float32"
        self.shape, self.reduce_op, self.process_set = shape, reduce_op, 0
        self.submit_ns = 0 if stamp is None else stamp[1]
        self.stamp = None if stamp is None else (stamp[0], stamp[2])


class Req:
    def __init__(self, name, rank, process_set):
        self.name, self.rank, self.process_set = name, rank, process_set


def _parse(text):
    return json.loads("[" + text + "]") if text else []


def _run_begins_ends(impl, ops, rec, error=None):
    lb = L.LineBuilder(2)
    opened = {}
    b = impl.begins(rec, lb._tensors, lb.tensor_text, opened, ops, 1_000)
    e = impl.ends(rec, lb._tensors, lb.tensor_text, opened, ops + [Op("never", (rec, 1, 1))],
                  1_000, 90_000, L.error_text(error))
    return b, e, opened, lb.take_threads()


@needs_c
@pytest.mark.parametrize("error", [None, "mismatch"])
def test_c_and_python_write_the_same_text(error):
    assert C is not None, "RINGSCOPE_REQUIRE_C is set but tracer._oplines did not build"
    rec, other = object(), object()
    rng = random.Random(3)
    ops = [Op(n, (rec, 2_000 + i, 6), nbytes=rng.randrange(1, 1 << 40),
              shape=tuple(rng.randrange(1, 9) for _ in range(rng.randrange(0, 3))))
           for i, n in enumerate(NAMES)]
    ops.insert(1, Op("elsewhere", (other, 5, 5)))
    ops.insert(2, Op("unstamped", None))
    c = _run_begins_ends(C, ops, rec, error)
    p = _run_begins_ends(P, ops, rec, error)
    assert c == p
    (btext, n, others), (etext, events, eothers), opened, threads = c
    assert n == len(NAMES) and [o.name for o in others] == ["elsewhere"]
    assert [o.name for o in eothers] == ["elsewhere"] and not opened
    assert events == len(NAMES) + 1   # "never" had no B: its whole slice is one X
    lines = _parse(btext) + _parse(etext)
    assert len(lines) == n + events
    # each tensor on its own thread, named by metadata: B at submission, E at completion
    names = {x["tid"]: x["args"]["name"] for x in _parse(",\n".join(threads))
             if x["name"] == "thread_name"}
    assert sorted(names) == list(range(v.TID_TENSOR_BASE, v.TID_TENSOR_BASE + len(NAMES) + 1))
    for i, name in enumerate(NAMES):
        outer = [x for x in lines if x["name"] == name]
        assert [x["ph"] for x in outer] == ["B", "E"] and all(x["cat"] == v.CAT_TENSOR for x in outer)
        assert names[outer[0]["tid"]] == name and outer[0]["tid"] == outer[1]["tid"]
        assert outer[0]["ts"] == (2_000 + i - 1_000) / 1e3 and outer[1]["ts"] == 89.0
        assert outer[1]["args"] == ({"step": 6} if error is None else {"step": 6, "error": error})
        assert "tensor" not in outer[0]["args"] and outer[0]["args"]["step"] == 6
    never = [x for x in _parse(etext) if x["name"] == "never"]
    assert [(x["ph"], x["ts"], x["dur"]) for x in never] == [("X", -0.999, 89.999)]
    assert never[0]["args"]["step"] == 1 and never[0]["args"]["bytes"] == 64
    assert never[0]["args"].get("error") == error and names[never[0]["tid"]] == "never"
    first = [x for x in lines if x["name"] == NAMES[1]]
    assert first[0]["args"]["shape"] == list(ops[3].shape) and first[0]["args"]["step"] == 6


@pytest.mark.parametrize("impl", ["c", "python"])
def test_begins_skip_ops_already_open(impl):
    """A begin is written once: a second pass over the same ops (the writer's pass over the ops in
    flight, after the engine's) writes nothing and leaves their text in ``opened``."""
    if impl == "c" and C is None:
        pytest.skip("tracer._oplines is not built (no C compiler at install)")
    mod = C if impl == "c" else P
    rec = object()
    ops = [Op(n, (rec, 10 + i, 2)) for i, n in enumerate(NAMES)]
    lb = L.LineBuilder(0)
    opened = {}
    text, n, _ = mod.begins(rec, lb._tensors, lb.tensor_text, opened, ops[:2], 0)
    assert n == 2 and len(_parse(text)) == 2
    text, n, _ = mod.begins(rec, lb._tensors, lb.tensor_text, opened, ops, 0)
    assert n == len(NAMES) - 2 and [x["name"] for x in _parse(text)] == NAMES[2:]
    assert set(opened) == set(NAMES)
    assert mod.begins(rec, lb._tensors, lb.tensor_text, opened, ops, 0)[:2] == ("", 0)


@needs_c
def test_c_ready_matches_python_and_caches_names():
    """One READY line per run of requests from one rank and process set, listing its tensors."""
    reqs = [Req(n, 0, 0) for n in NAMES] + [Req(n, 3, 2) for n in NAMES[:2]] + [Req("x", 3, 1)]
    lb, lp = L.LineBuilder(0), L.LineBuilder(0)
    args = (lb.ready_head, 12_345, 4)
    c = C.ready(lb._names, lb.json_name, reqs, *args)
    assert c == P.ready(lp._names, lp.json_name, reqs, *args)
    # C writes a plain ASCII name itself; only names that need escapes go through the cache
    assert set(lb._names) == {n for n in NAMES if not n.isascii() or '"' in n or "\n" in n}
    text, n = c
    got = _parse(text)
    assert n == len(got) == 3
    assert [(x["args"]["rank"], x["args"]["process_set"], x["args"]["tensors"]) for x in got] == \
        [(0, 0, NAMES), (3, 2, NAMES[:2]), (3, 1, ["x"])]
    assert all(x["name"] == v.READY and x["ts"] == 12.345 and x["args"]["step"] == 4 for x in got)
    assert C.ready(lb._names, lb.json_name, [], *args) == P.ready(lb._names, lb.json_name, [], *args) \
        == ("", 0)


@needs_c
def test_c_formats_odd_values_like_an_fstring():
    """Values that are not plain ints (a bool step, a huge byte count) come out as Python would."""
    rec = object()
    ops = [Op("a", (rec, 10**20, True), nbytes=2**62)]
    assert _run_begins_ends(C, ops, rec) == _run_begins_ends(P, ops, rec)


def test_missing_attribute_is_an_error_not_a_crash():
    class Bad:
        pass
    rec = object()
    bad = Bad()
    bad.stamp = (rec, 1)
    lb = L.LineBuilder(0)
    with pytest.raises(AttributeError):
        op_lines.begins(rec, lb._tensors, lb.tensor_text, {}, [bad], 0)


def test_impl_reports_what_runs():
    assert op_lines.IMPL == ("c" if C is not None and
                             os.environ.get("RINGSCOPE_PURE_PYTHON", "") in ("", "0") else "python")


@needs_c
def test_c_chunk_matches_python():
    """The writer's chunk: the C build formats spans, tensor spans and counters itself and hands
    anything unusual to the Python formatter; the bytes are the same as Python's."""
    from tracer.format import dumps
    lb = L.LineBuilder(5)
    records = [
        lb.counter(v.COUNTER_QUEUE_DEPTH, 1, 2),                      # already a line
        ("C", v.COUNTER_QUEUE_DEPTH, 10, 7), ("C", v.COUNTER_BYTES_IN_FLIGHT, 10, 1 << 40),
        ("C", "fill", 11, 2.5),                                        # a float: Python formats it
        ("X", v.FUSED_RESPONSE, v.CAT_FUSION, v.TID_FUSION, 100, 250, 3,
         {"response": 4, "tensors": ("a", NAMES[1]), "step": 3, "queue_ns": 12}, None),
        ("X", v.MEMCPY_IN_FUSION_BUFFER, v.CAT_MEMCPY, v.TID_FUSION, 110, 120, 3, {"response": 4}, None),
        ("X", v.STEP, v.CAT_FRAMEWORK, v.TID_FRAMEWORK, 0, 400, 2, None, None),
        ("X", "empty", "c", 7, 1, 2, 2, {}, None),
        ("X", "extra", "c", 7, 1, 2, 2, {"a": 1}, {"b": 2}),            # extra args: Python
        ("X", "huge", "c", 7, 1 << 70, (1 << 70) + 5, 2, {"a": 1}, None),  # past 64 bits: Python
        ("S", v.SYNCHRONIZE, v.CAT_FRAMEWORK, v.TID_FRAMEWORK, NAMES[1], 300, 900, 3),
        ("S", v.SYNCHRONIZE, v.CAT_FRAMEWORK, v.TID_FRAMEWORK, "grad.w", 300, 900, -1),
        # args C writes by hand when plain (ints, plain strings, None, bools, lists of names)
        ("X", "plain", "c", 7, 1, 2, 2, {"a": None, "b": True, "c": False, "d": ["x", "y"],
                                         "e": (), "f": "z", "step": 9}, None),
        ("X", "escaped", "c", 7, 1, 2, 2, {"a": 'q"uote'}, None),
        ("X", "wide", "c", 7, 1, 2, 2, {"a": 1 << 63, "b": ["x", 1]}, None),
        ("X", "unicode", "c", 7, 1, 2, 2, {"ü": 1}, None),
    ]

    def run(impl):
        b = L.LineBuilder(5)
        return impl.chunk(records, b._heads, b._head, b._names, b.json_name, dumps, b.deferred,
                          v.CAT_COUNTER)

    c, lines = run(C)
    assert (c, lines) == run(P)
    got = json.loads(b"[" + c + b"]")
    assert len(got) == len(records) == lines
    two = lb.tensor_ends([("a", 5, None), ("b", 6, None)], 0, 1)   # one record of two lines
    assert C.chunk([two, ("C", "x", 1, 2)], {}, lb._head, {}, lb.json_name, dumps, lb.deferred,
                   v.CAT_COUNTER)[1] == 3
    assert got[4]["args"]["tensors"] == ["a", NAMES[1]] and got[4]["dur"] == 0.15
    assert got[5]["args"] == {"response": 4, "step": 3} and got[6]["args"] == {"step": 2}
    assert got[8]["args"] == {"a": 1, "b": 2, "step": 2}
    assert got[10]["args"] == {"tensor": NAMES[1], "step": 3}
    assert got[12]["args"] == {"a": None, "b": True, "c": False, "d": ["x", "y"], "e": [], "f": "z",
                               "step": 9}
    assert [g["args"] for g in got[13:]] == [{"a": 'q"uote', "step": 2},
                                             {"a": 1 << 63, "b": ["x", 1], "step": 2},
                                             {"ü": 1, "step": 2}]
    assert C.chunk([], {}, None, {}, None, dumps, None, "counter") == (b"", 0)
    with pytest.raises(ValueError):   # an unknown record is the Python formatter's error
        C.chunk([("Z", 1)], {}, lb._head, {}, lb.json_name, dumps, lb.deferred, v.CAT_COUNTER)


class SlotOp:
    """The runtime's kind of op: a slots class (the C build reads its members at their offsets)."""
    __slots__ = ("name", "op_type", "nbytes", "dtype", "shape", "reduce_op", "process_set",
                 "submit_ns", "stamp")

    def __init__(self, plain):
        for k in self.__slots__:
            setattr(self, k, getattr(plain, k))


@needs_c
def test_c_reads_slots_ops_like_any_other():
    rec = object()
    plain = [Op(n, (rec, 2_000 + i, 6), nbytes=100 + i, shape=(i + 1, 3)) for i, n in enumerate(NAMES)]
    slots = [SlotOp(o) for o in plain]
    for impl_ops in (plain, slots, plain):   # the type seen last changes back and forth
        assert _run_begins_ends(C, impl_ops, rec) == _run_begins_ends(P, plain, rec)
    unset = SlotOp(plain[0])
    del unset.submit_ns
    lb = L.LineBuilder(0)
    with pytest.raises(AttributeError):
        C.begins(rec, lb._tensors, lb.tensor_text, {}, [unset], 0)
