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
        self.meta = {} if stamp is None else {P.SUBMITTED: (stamp[0], stamp[2])}


class Req:
    def __init__(self, name, rank, process_set):
        self.name, self.rank, self.process_set = name, rank, process_set


def _parse(text):
    return json.loads("[" + text + "]") if text else []


def _run_begins_ends(impl, ops, rec, t_resp, t_deq, error=None):
    lb = L.LineBuilder(2)
    opened = {}
    b = impl.begins(rec, lb._tensors, lb.tensor_text, lb.tensor_heads, opened, ops, 1_000)
    s = '{"step":7}}'
    last = s if error is None else L.jargs({v.ARG_ERROR: error}, 7) + "}"
    e = impl.ends(rec, lb._tensors, lb.tensor_text, lb.tensor_heads, opened, ops + [Op("never", (rec, 1, 1))],
                  1_000, 90_000, t_resp, t_deq, s, last)
    return b, e, opened


@needs_c
@pytest.mark.parametrize("t_resp,t_deq,error", [(50_000, 60_000, None), (50_000, None, None),
                                                (None, None, "mismatch")])
def test_c_and_python_write_the_same_text(t_resp, t_deq, error):
    assert C is not None, "RINGSCOPE_REQUIRE_C is set but tracer._oplines did not build"
    rec, other = object(), object()
    rng = random.Random(3)
    ops = [Op(n, (rec, 2_000 + i, 6), nbytes=rng.randrange(1, 1 << 40),
              shape=tuple(rng.randrange(1, 9) for _ in range(rng.randrange(0, 3))))
           for i, n in enumerate(NAMES)]
    ops.insert(1, Op("elsewhere", (other, 5, 5)))
    ops.insert(2, Op("unstamped", None))
    c = _run_begins_ends(C, ops, rec, t_resp, t_deq, error)
    p = _run_begins_ends(P, ops, rec, t_resp, t_deq, error)
    assert c == p
    (btext, n, others), (etext, events, unmatched, eothers), _ = c
    assert n == len(NAMES) and [o.name for o in others] == ["elsewhere"]
    assert [o.name for o in eothers] == ["elsewhere"] and unmatched == 1
    assert events == len(NAMES) * (2 if t_resp is None else 4)
    lines = _parse(btext) + _parse(etext)
    assert len(lines) == 2 * n + events
    outer = [x for x in lines if x["name"] == NAMES[1]]
    assert [x["ph"] for x in outer] == ["b", "e"] and outer[0]["ts"] == 1.001
    assert outer[0]["args"]["shape"] == list(ops[3].shape) and outer[0]["args"]["step"] == 6
    assert outer[1]["ts"] == 89.0 and outer[1]["args"].get("error") == error
    queue = [x for x in lines if x["name"] == v.QUEUE]
    assert len(queue) == (0 if t_resp is None else 2 * len(NAMES))


@needs_c
def test_c_ready_matches_python_and_caches_tails():
    reqs = [Req(n, r, ps) for n in NAMES for r, ps in ((0, 0), (3, 2))]
    lb = L.LineBuilder(0)
    args = (lb.ready_head, 12_345, 4)
    c = C.ready(lb._tails, lb.ready_tail, reqs, *args)
    assert c == P.ready(lb._tails, lb.ready_tail, reqs, *args)
    assert set(lb._tails) == set(NAMES)
    got = _parse(c)
    assert [(x["args"]["tensor"], x["args"]["rank"], x["args"]["process_set"]) for x in got] == \
        [(r.name, r.rank, r.process_set) for r in reqs]
    assert all(x["name"] == v.READY and x["ts"] == 12.345 and x["args"]["step"] == 4 for x in got)


@needs_c
def test_c_formats_odd_values_like_an_fstring():
    """Values that are not plain ints (a bool step, a huge byte count) come out as Python would."""
    rec = object()
    ops = [Op("a", (rec, 10**20, True), nbytes=2**62)]
    assert _run_begins_ends(C, ops, rec, 5, 6) == _run_begins_ends(P, ops, rec, 5, 6)


def test_missing_attribute_is_an_error_not_a_crash():
    class Bad:
        meta = {}
    rec = object()
    bad = Bad()
    bad.meta[P.SUBMITTED] = (rec, 1)
    lb = L.LineBuilder(0)
    with pytest.raises(AttributeError):
        op_lines.begins(rec, lb._tensors, lb.tensor_text, lb.tensor_heads, {}, [bad], 0)


def test_impl_reports_what_runs():
    assert op_lines.IMPL == ("c" if C is not None and
                             os.environ.get("RINGSCOPE_PURE_PYTHON", "") in ("", "0") else "python")
