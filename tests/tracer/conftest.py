"""Shared fixtures: a clean timeline environment per test, and a helper to read the trace back."""
from __future__ import annotations

import json

import pytest

import tracer

_VARS = ("RINGSCOPE_TIMELINE", "HOROVOD_TIMELINE", "RINGSCOPE_TIMELINE_MARK_CYCLES",
         "HOROVOD_TIMELINE_MARK_CYCLES", "RINGSCOPE_TIMELINE_STEPS", "RINGSCOPE_TIMELINE_MAX_MB",
         "RINGSCOPE_TIMELINE_CAP_MODE", "RINGSCOPE_TIMELINE_KEEP_PARTS",
         "RINGSCOPE_TIMELINE_BUFFER_EVENTS", "RINGSCOPE_TIMELINE_FLUSH_S", "RINGSCOPE_DISABLE_NVTX",
         "HOROVOD_DISABLE_NVTX_RANGES", "NVTX_DISABLE", "RINGSCOPE_NVTX_ALWAYS",
         "RINGSCOPE_TIMELINE_COUNTERS_HZ")


@pytest.fixture
def env(monkeypatch):
    """Clear every timeline switch; returns a setter ``env(NAME=value, ...)``. The system counters
    are off (RINGSCOPE_TIMELINE_COUNTERS_HZ=0) so that tests can count events exactly; the tests
    of the counters set a rate."""
    for v in _VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("RINGSCOPE_TIMELINE_COUNTERS_HZ", "0")

    def set_(**kv):
        for k, v in kv.items():
            monkeypatch.setenv(k, str(v))
    yield set_
    tracer.close()


def load(path) -> dict:
    """json.loads the file (it must be complete JSON as it is on disk)."""
    with open(path, encoding="utf-8") as f:
        return json.loads(f.read())


def events(path, ph=None, name=None) -> list[dict]:
    evs = load(path)["traceEvents"]
    return [e for e in evs if (ph is None or e["ph"] == ph) and (name is None or e["name"] == name)]


class Op:
    """The runtime's op as the tracer reads it (tracer/recorder.py, OPS)."""

    def __init__(self, rec, name, submit_ns, step, nbytes=64, shape=(4, 4), priority=0):
        from tracer import vocab as v
        self.name = name
        self.trace_key = (name, v.ALLREDUCE, nbytes, "float32", shape, "Sum", 0, priority)
        self.submit_ns = submit_ns
        self.stamp = (rec, step)
