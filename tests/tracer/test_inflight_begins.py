"""The runtime's op lifecycles through the real recorder: an op's whole slice is written when it
completes, and the writer writes the begin of an op still in flight at a flush (and at close), once,
before its end."""
from __future__ import annotations

import pytest

import tracer
from tests.tracer.conftest import Op, events
from tracer import recorder as R
from tracer import vocab as v


@pytest.fixture
def inflight():
    ops: dict = {}
    R.set_inflight(ops)
    yield ops
    R.set_inflight(None)


def _submit(rec, inflight, name, step=3):
    op = Op(rec, name, rec.now(), step)
    inflight[name] = op
    return op


def _finish(rec, inflight, ops):
    for op in ops:
        del inflight[op.name]          # the runtime's order: out of the mapping, then the end
    assert rec.ops_done(ops, rec.now()) is None


def _slices(path):
    return [(e["name"], e["ph"], e["ts"]) for e in events(path) if e.get("cat") == v.CAT_TENSOR]


def test_an_op_finished_between_flushes_is_written_whole_at_its_end(env, tmp_path, inflight):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0, "size": 1})
    a = _submit(rec, inflight, "grad.a")
    _finish(rec, inflight, [a])
    tracer.close()
    got = _slices(rec.path)
    assert [(n, ph) for n, ph, _ in got] == [("grad.a", "X")]
    assert got[0][2] == pytest.approx((a.submit_ns - rec.base_ns) / 1e3)
    x = [e for e in events(rec.path) if e.get("cat") == v.CAT_TENSOR][0]
    assert x["args"] == {"op": v.ALLREDUCE, "bytes": 64, "dtype": "float32", "shape": [4, 4],
                         "reduce_op": "Sum", "process_set": 0, "priority": 0, "step": 3}
    names = {e["tid"]: e["args"]["name"] for e in events(rec.path) if e["name"] == "thread_name"}
    assert names[x["tid"]] == "grad.a"


def test_an_op_in_flight_at_a_flush_gets_its_begin_then_its_end(env, tmp_path, inflight):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0, "size": 1})
    a, b = _submit(rec, inflight, "grad.a"), _submit(rec, inflight, "grad.b")
    assert rec.flush()
    assert [(n, ph) for n, ph, _ in _slices(rec.path)] == [("grad.a", "B"), ("grad.b", "B")]
    assert rec.flush()                                  # a second flush writes them no more
    assert len(_slices(rec.path)) == 2
    _finish(rec, inflight, [a, b])
    c = _submit(rec, inflight, "grad.a")                # the same name again, next step
    _finish(rec, inflight, [c])
    tracer.close()
    got = [(n, ph) for n, ph, _ in _slices(rec.path)]
    assert got == [("grad.a", "B"), ("grad.b", "B"), ("grad.a", "E"), ("grad.b", "E"),
                   ("grad.a", "X")]
    shut = [e for e in events(rec.path) if e["name"] == v.SHUTDOWN][0]["args"]
    assert shut["open_async_at_close"] == 0 and shut["events_written"] == 5 + 4   # + 2 threads' names


def test_ops_still_in_flight_at_close_are_open_in_the_file(env, tmp_path, inflight):
    """A hung op: its begin is in the file and the close says how many slices stay open."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_FLUSH_S=1)
    rec = tracer.configure({"rank": 0, "size": 1})
    _submit(rec, inflight, "grad.hung")
    other = tracer.recorder.NullRecorder()
    inflight["grad.elsewhere"] = Op(other, "grad.elsewhere", 0, 1)   # another timeline's op
    tracer.close()
    assert [(n, ph) for n, ph, _ in _slices(rec.path)] == [("grad.hung", "B")]
    shut = [e for e in events(rec.path) if e["name"] == v.SHUTDOWN][0]["args"]
    assert shut["open_async_at_close"] == 1


def test_an_end_carries_the_step_its_op_was_submitted_in(env, tmp_path, inflight):
    """An op left in flight across ``mark_step`` (a user's async op) ends in the next step: its
    end line keeps the submission step, as its begin does (the loader merges the end's args)."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0, "size": 1})
    a = _submit(rec, inflight, "grad.a", step=3)
    rec.mark_step(4)
    _finish(rec, inflight, [a])
    tracer.close()
    got = [(e["ph"], e["args"]["step"]) for e in events(rec.path) if e.get("cat") == v.CAT_TENSOR]
    assert got == [("X", 3)]


def test_ops_of_another_recorder_are_handed_back(env, tmp_path):
    """ops_done records the ops this recorder stamped and returns the others (for theirs)."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0, "size": 1})
    other = tracer.recorder.NullRecorder()
    mine, theirs = Op(rec, "grad.mine", rec.now(), 0), Op(other, "grad.theirs", rec.now(), 0)
    unstamped = Op(rec, "grad.unstamped", rec.now(), 0)
    unstamped.stamp = None
    assert rec.ops_done([mine, theirs, unstamped], rec.now(), "failed") == [theirs]
    assert other.ops_done([theirs, mine], rec.now()) == [mine]
    tracer.close()
    got = [(e["name"], e["ph"], e["args"].get("error")) for e in events(rec.path)
           if e.get("cat") == v.CAT_TENSOR]
    assert got == [("grad.mine", "X", "failed")]
