"""The recorder's one-call paths: a response's completions (``Completions``), a pass's READY ticks
(``ready_held``) and spans (``Spans``, C only) give what the general paths give."""
import itertools
import json
import threading
import time
from collections import deque

import pytest

from tracer import lines as L
from tracer import op_lines_py as P
from tracer import vocab as v
from tracer.timeline import TimelineRecorder
from tracer.config import TimelineSettings

from tests.tracer.test_op_lines import C, NAMES, Op, Req, needs_c

IMPLS = [pytest.param("c", marks=needs_c), "python"]


def _mod(impl):
    return C if impl == "c" else P


def _parse(text):
    return json.loads("[" + text + "]") if text else []


def _completions(mod, rec, q=None, cap=100, drops=None, opened=None, table=False):
    lb = L.LineBuilder(1)
    opened = {} if opened is None else opened
    q = deque() if q is None else q
    drops = itertools.count() if drops is None else drops
    gen = (lb._gen,) if table else ()
    return mod.Completions(rec, lb._tensors, lb.tensor_text, opened, threading.Lock(), q, cap,
                           drops, 1_000, *gen), lb, opened, q, drops


@pytest.mark.parametrize("impl", IMPLS)
def test_completions_write_what_ends_writes_each_end_with_its_own_step(impl):
    mod = _mod(impl)
    rec, other = object(), object()
    ops = [Op(n, (rec, 2_000 + i, 5 + i % 2)) for i, n in enumerate(NAMES)]
    ops += [Op("elsewhere", (other, 3, 3)), Op("unstamped", None)]
    comp, lb, opened, q, _ = _completions(mod, rec)
    # the first op's begin is written already (the writer's pass over ops in flight)
    mod.begins(rec, lb._tensors, lb.tensor_text, opened, ops[:1], 1_000)
    done = [(op, None, None) for op in ops]
    rest = comp(done, 90_000)
    assert rest == [done[len(NAMES)]] and not opened and len(q) == 1
    got = _parse(q[0])
    assert len(got) == len(NAMES)   # one line each: the E of the op whose B is written, else an X
    for i, name in enumerate(NAMES):
        mine = [x for x in got if x["name"] == name]
        assert [x["ph"] for x in mine] == (["E"] if i == 0 else ["X"])
        assert mine[0]["tid"] == v.TID_TENSOR_BASE + i and mine[0]["args"]["step"] == 5 + i % 2
        if i:
            assert mine[0]["ts"] == (1_000 + i) / 1e3 and mine[0]["ts"] + mine[0]["dur"] == 89.0
        else:
            assert mine[0]["ts"] == 89.0 and mine[0]["args"] == {"step": 5}
    # the same text as the general path
    same = [Op(n, (rec, 2_000 + i, 7)) for i, n in enumerate(NAMES)]
    comp2, lb2, _, q2, _ = _completions(mod, rec)
    comp2([(op, None, None) for op in same], 90_000)
    text, events, _ = P.ends(rec, lb2._tensors, lb2.tensor_text, {}, same, 1_000, 90_000, "")
    assert q2[0] == text and events == len(NAMES)


@pytest.mark.parametrize("impl", IMPLS)
def test_completions_leave_errors_to_the_general_path_and_respect_close_and_cap(impl):
    mod = _mod(impl)
    rec = object()
    ops = [Op(n, (rec, 10, 1)) for n in NAMES]
    comp, _, opened, q, drops = _completions(mod, rec, cap=1)
    done = [(op, None, None) for op in ops]
    failed = done[:1] + [(ops[1], None, "boom")]
    assert comp(failed, 50) == failed and not q   # nothing written: every item handed back
    assert comp(done[:2], 50) is None and len(q) == 1
    assert comp(done[2:], 60) is None and len(q) == 1   # full: counted, not buffered
    assert next(drops) == len(done[2:])   # each one X
    comp.closed = True
    q.clear()
    assert comp(done, 70) is None and not q


@needs_c
def test_c_completions_table_writes_what_the_dict_writes_through_every_change():
    """The C table of texts (``gen`` given) against the twin, response by response: the same ops
    again (new objects, equal keys), a tensor whose shape, bytes or reduce op changed, a name equal
    to a kept one but another object, more names than the table's first size, a new file part
    (its thread names made again) and a shape too long to compare inline."""
    rec = object()
    comp, lb, _, q, _ = _completions(C, rec, table=True)
    twin, lt, _, qt, _ = _completions(P, rec)
    many = [f"grad.{i}" for i in range(300)]

    def ops(step, names, shape=(4, 4), nbytes=64, reduce_op="Sum"):
        return [(Op("".join(list(n)), (rec, 2_000 + i, step), shape=tuple(list(shape)),
                    nbytes=int(str(nbytes)), reduce_op=reduce_op), None, None)
                for i, n in enumerate(names)]

    responses = [ops(1, NAMES), ops(2, NAMES), ops(3, NAMES[:2], shape=(8, 2)),
                 ops(4, NAMES[:2], nbytes=1 << 40), ops(5, NAMES, reduce_op="Max"),
                 ops(6, many), ops(7, many[::-1]), "new part", ops(8, NAMES + many[:5]),
                 ops(9, NAMES, shape=tuple(range(1, 10))), ops(10, NAMES, shape=tuple(range(1, 10))),
                 ops(11, NAMES, shape=[4, 4])]
    for resp in responses:
        if resp == "new part":
            for b in (lb, lt):
                b.new_part("")
            continue
        assert comp(resp, 90_000) is None and twin(resp, 90_000) is None
        assert q.pop() == qt.pop()
        assert lb.take_threads() == lt.take_threads()
    assert lb._tids == lt._tids and len(lb._tids) == len(NAMES) + len(many)


@needs_c
def test_c_completions_reject_bad_items_and_release_the_lock():
    rec = object()
    comp, _, _, _, _ = _completions(C, rec)
    with pytest.raises(TypeError):
        comp([("not", "three")], 1)
    with pytest.raises(AttributeError):   # an op without a meta: the lock is released anyway
        comp([(object(), None, None)], 1)
    lock = threading.Lock()
    lb = L.LineBuilder(0)
    comp = C.Completions(rec, lb._tensors, lb.tensor_text, {}, lock, deque(), 9, itertools.count(),
                         0)
    with pytest.raises(AttributeError):
        comp([(object(), None, None)], 1)
    assert lock.acquire(blocking=False)


@pytest.mark.parametrize("impl", IMPLS)
def test_ready_held_is_ready_for_each_arrival(impl):
    mod = _mod(impl)
    held = [([Req(n, 1, 0) for n in NAMES], 5_000), ([Req("x", 2, 0), Req("y", 2, 1)], 7_000)]
    lb, lp = L.LineBuilder(0), L.LineBuilder(0)
    text, n = mod.ready_held(lb._names, lb.json_name, held, lb.ready_head, 1_000, 3)
    parts = [P.ready(lp._names, lp.json_name, reqs, lp.ready_head, t - 1_000, 3)
             for reqs, t in held]
    assert (text, n) == (",\n".join(p[0] for p in parts), sum(p[1] for p in parts)) and n == 3
    assert [x["ts"] for x in _parse(text)] == [4.0, 6.0, 6.0]
    assert mod.ready_held(lb._names, lb.json_name, [], lb.ready_head, 0, 3) == ("", 0)


def _recorder(tmp_path, spans: bool):
    from tracer import op_lines
    saved = op_lines.Spans
    if not spans:
        op_lines.Spans = None
    try:
        return TimelineRecorder({"rank": 0, "size": 1}, TimelineSettings(flush_interval_s=60),
                                tmp_path / ("c.json" if spans else "py.json"), step=4)
    finally:
        op_lines.Spans = saved


def _needs_spans():
    from tracer import op_lines
    if op_lines.Spans is None:
        pytest.skip(f"the recorder uses its Python span calls ({op_lines.IMPL} line functions)")


def _events_of(rec):
    """The recorder's buffered events as they will be written: the lines formatted where they
    were recorded (C build), then the records left for the writer, formatted as it does."""
    lines = []
    if rec._lines is not None:
        text, n = rec._lines.take()
        lines = _parse(text.decode())
        assert len(lines) == n
    rest = [json.loads(r if r.__class__ is str else rec._lb.deferred(r)) for r in rec._q]
    rec._q.clear()
    return lines + rest


@needs_c
def test_c_spans_write_the_lines_the_python_methods_write(tmp_path):
    _needs_spans()
    t = time.perf_counter_ns()
    assert t <= C.now_ns() <= time.perf_counter_ns()   # the recorders' clock
    got = []
    for use_c in (True, False):
        rec = _recorder(tmp_path, use_c)
        assert (type(rec.begin).__name__ == "builtin_function_or_method") == use_c
        rec._q.clear()
        a = rec.begin(v.TID_FUSION, v.FUSED_RESPONSE, v.CAT_FUSION, {"response": 3},
                      ts_ns=rec.base_ns + 500)
        b = rec.begin(v.TID_FRAMEWORK, v.SYNCHRONIZE, v.CAT_FRAMEWORK, tensor="grad.w")
        c = rec.begin(v.TID_BACKEND, "RING_ALLGATHER", v.CAT_COMM, None, None, rec.base_ns + 9)
        rec.end(b)
        rec.end(a, extra_args={"more": 1})
        rec.end(c)
        rec.end(None)
        rec.counter(v.COUNTER_QUEUE_DEPTH, 3, ts_ns=rec.base_ns + 7)
        rec.counters(((v.COUNTER_QUEUE_DEPTH, 1), (v.COUNTER_FUSION_FILL, 2.5)), rec.base_ns + 8)
        rec.counters([("now", 5)])
        with pytest.raises(ValueError):       # a span ends when its block raises, and re-raises
            with rec.span(v.TID_BACKEND, "RING_ALLREDUCE", v.CAT_COMM, {"response": 5}) as sp:
                raise ValueError
        with rec.span(v.TID_BACKEND, "MPI_BCAST", v.CAT_COMM):
            pass
        if use_c:
            with pytest.raises(RuntimeError, match="entered once"):
                sp.__enter__()
        evs = _events_of(rec)
        rec.enabled = False
        assert rec.begin(v.TID_FUSION, "x", "y") is None
        rec.counter("off", 1)
        rec.counters((("off", 1),))
        with rec.span(v.TID_BACKEND, "off", v.CAT_COMM):
            pass
        assert not _events_of(rec)
        rec.close()
        assert sorted(e["ph"] for e in evs) == ["C"] * 4 + ["X"] * 5
        counters = sorted((e["name"], e["ts"], e["args"]) for e in evs if e["ph"] == "C")
        counters = sorted(counters, key=lambda c: c[1])   # a float value is Python's to format
        assert counters[:3] == [(v.COUNTER_QUEUE_DEPTH, 0.007, {"value": 3}),
                                (v.COUNTER_FUSION_FILL, 0.008, {"value": 2.5}),
                                (v.COUNTER_QUEUE_DEPTH, 0.008, {"value": 1})]
        assert counters[3][0] == "now" and counters[3][2] == {"value": 5} and counters[3][1] > 0
        spans = {e["name"]: e for e in evs if e["ph"] == "X"}
        assert spans[v.FUSED_RESPONSE]["ts"] == 0.5 and spans["RING_ALLGATHER"]["ts"] == 0.009
        assert spans[v.FUSED_RESPONSE]["args"] == {"response": 3, "more": 1, "step": 4}
        assert spans[v.SYNCHRONIZE]["args"] == {"tensor": "grad.w", "step": 4}
        assert spans["RING_ALLREDUCE"]["args"] == {"response": 5, "step": 4}
        assert spans["MPI_BCAST"]["args"] == {"step": 4} and spans["MPI_BCAST"]["tid"] == v.TID_BACKEND
        # the end times (and the SYNCHRONIZE span's start) differ between runs
        for e in evs:
            e.pop("dur", None)
            if e["name"] in (v.SYNCHRONIZE, "now", "RING_ALLREDUCE", "MPI_BCAST"):   # begun now
                e.pop("ts")
        got.append(sorted(json.dumps(e, sort_keys=True) for e in evs))
    assert got[0] == got[1]


def test_c_spans_heads_stay_right_past_their_cache(tmp_path):
    """The C spans find a line's head by identity among the last 16 used: more names than that,
    names equal but not the same object, and one name on two threads keep each line's own head;
    args that are not plain (a float) take the record path and come out the same."""
    _needs_spans()
    got = []
    for use_c in (True, False):
        rec = _recorder(tmp_path, use_c)
        rec._q.clear()
        names = ["".join(["SPAN_", str(k)]) for k in range(20)]
        for i in range(60):
            # the same object, on either thread, or an equal new one
            name = names[i % 20] if i % 2 else "".join(["SPAN_", str(i % 20)])
            tid = v.TID_BACKEND if i % 3 else v.TID_FUSION
            args = {"i": i, "half": i / 2} if i % 5 == 0 else {"i": i}   # a float: the record path
            rec.end(rec.begin(tid, name, v.CAT_COMM, args, ts_ns=rec.base_ns + i))
            rec.counter("".join(["ctr", str(i % 18)]), i, ts_ns=rec.base_ns + i)
        evs = _events_of(rec)
        rec.close()
        assert len(evs) == 120
        for e in evs:
            i = e["args"]["i"] if e["ph"] == "X" else e["args"]["value"]
            assert e["ts"] == i / 1e3
            if e["ph"] == "X":
                assert e["name"] == f"SPAN_{i % 20}" and e["cat"] == v.CAT_COMM
                assert e["tid"] == (v.TID_BACKEND if i % 3 else v.TID_FUSION)
                assert e["args"].get("half") == (i / 2 if i % 5 == 0 else None)
            else:
                assert e["name"] == f"ctr{i % 18}" and e["cat"] == v.CAT_COUNTER
            e.pop("dur", None)
        got.append(sorted(json.dumps(e, sort_keys=True) for e in evs))
    assert got[0] == got[1]


@pytest.mark.parametrize("use_c", [pytest.param(True, marks=needs_c), False])
def test_queue_counters_write_only_what_changed(tmp_path, use_c):
    if use_c:
        _needs_spans()
    rec = _recorder(tmp_path, use_c)
    rec._q.clear()
    seen = []
    for depth, nbytes, on in [(3, 300, True), (3, 300, True), (3, 400, True), (0, 0, False),
                              (0, 0, True), (0, 0, True), (2, 0, True)]:
        rec.enabled = on
        rec.queue_counters(depth, nbytes)
        seen.append([(e["name"], e["args"]["value"]) for e in _events_of(rec)])
    rec.close()
    pair = [v.COUNTER_QUEUE_DEPTH, v.COUNTER_BYTES_IN_FLIGHT]
    assert seen == [list(zip(pair, (3, 300))), [], list(zip(pair, (3, 400))), [],
                    list(zip(pair, (0, 0))), [], list(zip(pair, (2, 0)))]


@needs_c
def test_c_spans_count_drops_and_reject_bad_calls(tmp_path):
    _needs_spans()
    rec = _recorder(tmp_path, True)
    try:
        with pytest.raises(TypeError):
            rec.begin(1, "x")
        with pytest.raises(TypeError):
            rec.begin(1, "x", "y", nope=2)
        with pytest.raises(TypeError):
            rec.end(("short",))
        with pytest.raises(TypeError):
            rec.counters([("name-only",)])
        rec._lines.take()
        for _ in range(rec._cap):
            rec.counter("fill", 1)
        assert len(rec._lines) == rec._cap
        before = rec.events_dropped()
        rec.end(rec.begin(1, "x", "y"))
        rec.counters((("a", 1), ("b", 2)))
        assert rec.events_dropped() == before + 3 and len(rec._lines) == rec._cap
        rec._lines.take()
    finally:
        rec.close()


@pytest.mark.parametrize("impl", IMPLS)
def test_a_closed_recorder_is_collected(tmp_path, impl):
    """The recorder and its C calls refer to each other: the collector must free them."""
    import gc
    import weakref
    from tracer import op_lines
    saved = op_lines.Completions, op_lines.Spans
    if impl == "python":
        op_lines.Completions, op_lines.Spans = P.Completions, None
    try:
        rec = _recorder(tmp_path, impl == "c")
    finally:
        op_lines.Completions, op_lines.Spans = saved
    rec.close()
    ref = weakref.ref(rec)
    del rec
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("error", [None, "boom"])
def test_general_path_ends_carry_each_ops_own_step(tmp_path, error):
    """ops_end (errors, NVTX) writes a response fusing ops of two steps as the fast path does."""
    rec = _recorder(tmp_path, True)
    try:
        ops = [Op(n, (rec, rec.base_ns + 10 * i, 3 + i % 2)) for i, n in enumerate(NAMES)]
        rec._q.clear()
        assert rec.ops_end(ops + [Op("elsewhere", (object(), 0, 0))], rec.base_ns + 99_000,
                           error)[0].name == "elsewhere"
        got = _parse(rec._q.pop())
        assert not rec._q
        ends = {x["name"]: (x["args"]["step"], x["args"].get("error")) for x in got if x["ph"] == "X"}
        assert ends == {n: (3 + i % 2, error) for i, n in enumerate(NAMES)} and len(got) == len(NAMES)
    finally:
        rec.close()


class _Rec:
    def __init__(self, enabled=True, step=3):
        self.enabled, self.step = enabled, step


@pytest.mark.parametrize("impl", IMPLS)
def test_stamper_gives_one_tuple_per_recorder_and_step_and_settles(impl):
    mod = _mod(impl)
    a, b = _Rec(), _Rec()
    state = {"_recorder": a}
    stamp = mod.Stamper(state)
    assert stamp.last is None
    first = stamp()
    assert first == (a, 3) and first[0] is a and stamp() is first and stamp.last is first
    a.step = 4
    assert stamp() == (a, 4) and stamp.last == (a, 4)
    a.enabled = False
    assert stamp() is None and stamp.last == (a, 4)   # a disabled recorder stamps nothing
    stamp.settle()
    assert stamp.last == (a, 4)                      # still the current one: kept
    state["_recorder"] = b
    stamp.settle()
    assert stamp.last is None                        # replaced (closed): forgotten
    assert stamp() == (b, 3) and stamp.last[0] is b
    stamp.last = None                                # the bench forgets on purpose
    assert stamp.last is None and stamp() == (b, 3)


@needs_c
def test_c_stamper_reports_a_missing_recorder_and_bad_calls():
    stamp = C.Stamper({})
    with pytest.raises(RuntimeError, match="no recorder"):
        stamp()
    with pytest.raises(TypeError):
        stamp(1)
    with pytest.raises(TypeError):
        C.Stamper([])
    with pytest.raises(RuntimeError, match="not initialised"):
        C.Stamper.__new__(C.Stamper)()
    stamp = C.Stamper({"_recorder": _Rec()})
    del stamp.last   # a deleted stamp reads as none
    assert stamp() is not None
    del stamp.last
    stamp.settle()
    assert stamp.last is None


def test_the_runtime_stamps_through_the_process_wide_recorder():
    from tracer import op_lines, recorder
    stamp = op_lines.stamper()
    assert stamp() is None   # the NullRecorder records nothing
    rec = _Rec(step=9)
    old = recorder.get_recorder()
    recorder.set_recorder(rec)
    try:
        assert stamp() == (rec, 9)
    finally:
        recorder.set_recorder(old)
    stamp.settle()
    assert stamp.last is None


@needs_c
def test_c_calls_made_without_init_raise_instead_of_crashing():
    spans = C.Spans.__new__(C.Spans)
    for call in (lambda: spans.begin(1, "a", "b"), lambda: spans.end(None),
                 lambda: spans.counter("a", 1), lambda: spans.counters([]),
                 lambda: spans.span(1, "a", "b")):
        with pytest.raises(RuntimeError, match="not initialised"):
            call()
    with pytest.raises(RuntimeError, match="not initialised"):
        C.Completions.__new__(C.Completions)([], 1)


@needs_c
def test_c_lines_join_take_and_hand_unusual_records_to_python():
    """Lines: text and records become lines joined by ",\\n", taken whole; a record the C formatter
    leaves to Python goes to the deque; past the cap events are dropped and counted."""
    from tracer.format import dumps
    lb, q, drops = L.LineBuilder(3), deque(), itertools.count()
    lines = C.Lines(lb._heads, lb._head, lb._names, lb.json_name, dumps, v.CAT_COUNTER, q, 4, drops)
    assert lines.take() == (b"", 0)
    lines.put('{"a":1},\n{"b":2}', 2)
    lines.record(("C", v.COUNTER_QUEUE_DEPTH, 1_000, 7))
    lines.record(("C", v.COUNTER_QUEUE_DEPTH, 2_000, 0.5))       # a float: Python's
    assert len(lines) == 3 and list(q) == [("C", v.COUNTER_QUEUE_DEPTH, 2_000, 0.5)]
    text, n = lines.take()
    assert n == 3 and _parse(text.decode())[2] == json.loads(lb.counter(v.COUNTER_QUEUE_DEPTH, 1_000, 7))
    assert lines.take() == (b"", 0)
    lines.put("{}", 1)
    lines.put("{},\n{},\n{}", 3)
    lines.put("{}", 1)                                             # full: dropped
    lines.record(("C", "x", 1, 1))
    assert next(drops) == 2 and lines.take()[1] == 4
    with pytest.raises(RuntimeError, match="not initialised"):
        C.Lines.__new__(C.Lines).put("{}", 1)
    with pytest.raises(TypeError):
        lines.record(["C", "x", 1, 1])


@needs_c
def test_c_lines_take_a_burst_whole_and_start_again():
    """A burst larger than the memory Lines keeps between flushes comes out whole, and the buffer
    works as before afterwards."""
    from tracer.format import dumps
    lb = L.LineBuilder(0)
    lines = C.Lines(lb._heads, lb._head, lb._names, lb.json_name, dumps, v.CAT_COUNTER, deque(),
                    1 << 20, itertools.count())
    line = '{"name":"x","ph":"i","args":{"pad":"' + "p" * 200 + '"}}'
    for _ in range(60_000):          # ~14 MB
        lines.put(line, 1)
    text, n = lines.take()
    assert n == 60_000 and len(text) == 60_000 * len(line) + 2 * 59_999
    lines.put(line, 1)
    assert lines.take() == (line.encode(), 1)


def test_c_note_writes_the_lines_its_twin_writes(tmp_path):
    """A response's note (C: clock read into slots, lines written by the completion's call; the
    twin: each line live) gives the same lines: its span with queue_ns, the memcpy spans inside
    it, the fill counter, the backend's spans nested as entered; a span with no response open and
    a second close write nothing; a response no completion closed is written by ``close``."""
    _needs_spans()
    got = []
    for use_c in (True, False):
        rec = _recorder(tmp_path, use_c)
        note = rec.response_note
        assert (type(note).__name__ == "Note") == use_c
        rec._q.clear()
        with note.span("OUTSIDE", 1, "ring"):
            pass
        args = {v.ARG_RESPONSE: 7, v.ARG_TENSORS: ["a", "b"], v.ARG_COUNT: 2, v.ARG_BYTES: 96,
                v.ARG_DTYPE: "float32", v.ARG_OP: v.ALLREDUCE, v.ARG_REDUCE_OP: "Sum",
                v.ARG_BACKEND: "ring", v.ARG_THRESHOLD: 1 << 20, v.ARG_PROCESS_SET: 0,
                v.ARG_STEP: 4}
        t_resp = rec.now()
        note.open(dict(args), t_resp, 3)
        assert note.times[0] == t_resp and note.times[1] >= t_resp
        note.mark(0)
        note.mark(1)
        with note.span(v.RING_ALLREDUCE, 96, "ring"):
            with note.span(v.RING_REDUCE_SCATTER, 96, "ring"):
                pass
            with note.span(v.RING_ALLGATHER, 96.0, "mpi"):   # int(nbytes), as activity did
                pass
        note.mark(2)
        note.mark(3)
        assert rec.finish_ops([], rec.now(), note) is None
        note.close()
        assert note.times == (None, None)
        note.open(dict(args, response=8, tensors=["c"], count=1), None, 3)
        with pytest.raises(ValueError):
            with note.span("MPI_ALLREDUCE", 8, "mpi"):
                raise ValueError
        note.close()
        note.open(dict(args, response=9, bytes=2.5), None, 3)   # not plain: the writer's records
        note.mark(0)
        note.mark(1)
        note.close()
        evs = _events_of(rec)
        rec.close()
        fills = [e["args"]["value"] for e in evs if e["name"] == v.COUNTER_FUSION_FILL]
        assert sorted(fills) == [2.5, 96]
        by = {(e["name"], e.get("args", {}).get("response")): e for e in evs if e["ph"] == "X"}
        assert len(by) == len(evs) - 2 == 10 and ("OUTSIDE", None) not in by
        fused = by[(v.FUSED_RESPONSE, 7)]
        assert fused["args"]["queue_ns"] >= 0 and "queue_ns" not in by[(v.FUSED_RESPONSE, 8)]["args"]
        inside = [by[(n, 7)] for n in (v.MEMCPY_IN_FUSION_BUFFER, v.MEMCPY_OUT_FUSION_BUFFER)]
        outer = by[(v.RING_ALLREDUCE, 7)]
        inside += [by[(n, 7)] for n in (v.RING_REDUCE_SCATTER, v.RING_ALLGATHER)]
        for e, host in zip(inside, [fused, fused, outer, outer]):
            assert host["ts"] <= e["ts"] and e["ts"] + e["dur"] <= host["ts"] + host["dur"] + 1e-3
        assert by[(v.RING_ALLGATHER, 7)]["args"] == {
            "response": 7, "bytes": 96, "backend": "mpi", "size": 3, "process_set": 0, "step": 4}
        for e in evs:
            for k in ("ts", "dur"):
                e.pop(k, None)
            e.get("args", {}).pop("queue_ns", None)
        got.append(sorted(json.dumps(e, sort_keys=True) for e in evs))
    assert got[0] == got[1]


def test_c_mark_step_writes_what_the_python_method_writes(tmp_path):
    """``mark_step`` in C (bound when there is no window of steps): the STEP span of the step that
    ends, the next step counted or set, nothing written while disabled or before the first step."""
    _needs_spans()
    got = []
    for use_c in (True, False):
        from tracer import op_lines
        saved = op_lines.Spans
        if not use_c:
            op_lines.Spans = None
        try:
            rec = TimelineRecorder({"rank": 0, "size": 1}, TimelineSettings(flush_interval_s=60),
                                   tmp_path / f"step{use_c}.json", step=-1)
        finally:
            op_lines.Spans = saved
        assert (type(rec.mark_step).__name__ == "builtin_function_or_method") == use_c
        rec._q.clear()
        rec.mark_step()        # -1 -> 0: no span (no step before)
        rec.mark_step()        # 0 -> 1
        rec.mark_step(9.0)     # 1 -> 9
        rec.enabled = False
        rec.mark_step()        # 9 -> 10, not written
        rec.enabled = True
        rec.mark_step()        # 10 -> 11
        assert rec.step == 11 and type(rec.step) is int
        evs = _events_of(rec)
        rec.close()
        assert [(e["name"], e["tid"], e["args"]) for e in evs] == [
            (v.STEP, v.TID_FRAMEWORK, {"step": s}) for s in (0, 1, 10)]
        assert all(e["dur"] >= 0 for e in evs)
        assert evs[0]["ts"] + evs[0]["dur"] <= evs[1]["ts"] + 1e-6   # (µs as decimals)
        got.append([sorted(set(e) - {"ts", "dur"}) for e in evs])
    assert got[0] == got[1]
    window = TimelineRecorder({"rank": 0, "size": 1},
                              TimelineSettings(flush_interval_s=60, steps_window=(2, 4)),
                              tmp_path / "window.json", step=-1)
    assert type(window.mark_step).__name__ == "method"
    window.close()
