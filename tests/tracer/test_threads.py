"""Phases and regions of OS threads other than the framework thread: tid TID_USER_BASE + k, named
after the thread in the trace (again in every rotated part); the framework thread is the one that
configured the timeline."""
from __future__ import annotations

import threading

import tracer
from tests.tracer.conftest import events, load
from tracer import vocab as v


def _in_thread(fn, name):
    out = []
    th = threading.Thread(target=lambda: out.append(fn()), name=name)
    th.start()
    th.join()
    return out[0]


def test_each_other_thread_gets_a_named_tid(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 1})

    def record():
        tid = rec.thread_tid()
        rec.end(rec.begin(tid, "work", v.CAT_REGION))
        return tid, rec.thread_tid()

    assert rec.thread_tid() == v.TID_FRAMEWORK   # configure ran on this thread
    assert _in_thread(record, "loader-a") == (v.TID_USER_BASE, v.TID_USER_BASE)
    assert _in_thread(record, "loader-b") == (v.TID_USER_BASE + 1, v.TID_USER_BASE + 1)
    tracer.close()
    named = {e["tid"]: e["args"]["name"] for e in events(rec.path, ph="M", name="thread_name")}
    assert named[v.TID_USER_BASE] == "loader-a" and named[v.TID_USER_BASE + 1] == "loader-b"
    sort = {e["tid"]: e["args"]["sort_index"] for e in events(rec.path, ph="M",
                                                              name="thread_sort_index")}
    assert sort[v.TID_USER_BASE + 1] == v.TID_USER_BASE + 1
    assert sorted(e["tid"] for e in events(rec.path, ph="X", name="work")) == \
        [v.TID_USER_BASE, v.TID_USER_BASE + 1]
    assert all(e["pid"] == 1 for e in events(rec.path))


def test_the_framework_thread_is_the_one_that_configured(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    got: dict = {}
    asked, answered = threading.Event(), threading.Event()

    def trainer():
        got["rec"] = tracer.configure({"rank": 0})
        answered.set()
        asked.wait(10)
        got["trainer"] = got["rec"].thread_tid()
        answered.set()

    th = threading.Thread(target=trainer, name="trainer")
    th.start()
    try:
        assert answered.wait(10)
        answered.clear()
        assert got["rec"].thread_tid() == v.TID_USER_BASE   # the main thread is another one now
        asked.set()
        assert answered.wait(10)
        assert got["trainer"] == v.TID_FRAMEWORK
    finally:
        asked.set()
        th.join()
        tracer.close()
        tracer.recorder.set_framework_thread()


def test_rotated_parts_name_the_other_threads_again(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_MAX_MB=0.02,
        RINGSCOPE_TIMELINE_CAP_MODE="rotate", RINGSCOPE_TIMELINE_KEEP_PARTS=5)
    rec = tracer.configure({"rank": 0})
    tid = _in_thread(rec.thread_tid, "prefetcher")
    for i in range(400):
        rec.end(rec.begin(tid, f"region-{i}", v.CAT_REGION))
        if i % 50 == 0:
            rec.flush()
    tracer.close()
    parts = [load(p) for p in sorted(tmp_path.iterdir())]
    assert len(parts) >= 3
    for d in parts:
        named = {e["tid"]: e["args"]["name"] for e in d["traceEvents"] if e["name"] == "thread_name"}
        assert named.get(tid) == "prefetcher"
