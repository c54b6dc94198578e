"""Format 3 (a thread per tensor; a lifecycle is one X, or B/E) reads into the same tables as format 2.

A small hand-written rank file in format 3 and its format-2 twin (the same ops as async b/e pairs, begins
in the same file order): both parsers give equal tables for each, and the two formats give equal tables.
"""
from __future__ import annotations

import pandas as pd
import pytest

from tests.viewer import tracegen
from tests.viewer.test_fast_path import TABLES, _same
from viewer import load_ringscope
from viewer.jsonstream import TraceReader
from viewer.load_ringscope import parse_file


def _args(tensor, nbytes, step, fmt):
    a = {"op": "ALLREDUCE", "bytes": nbytes, "dtype": "float32", "shape": [nbytes // 4], "reduce_op": "Sum",
         "process_set": 0, "step": step}
    return {"tensor": tensor, **a} if fmt == 2 else a


def _thread(tid, tensor):
    return [{"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": tensor}},
            {"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": tid, "args": {"sort_index": tid}}]


def _life(ph, tensor, tid, ts, args, dur=None):
    ev = {"name": tensor, "cat": "tensor", "ph": ph, "pid": 0, "tid": tid, "ts": ts, "args": args}
    if dur is not None:
        ev["dur"] = dur
    return ev


def _async(ph, name, ts, args):
    return {"name": name, "cat": "tensor" if name.startswith("grad") else "framework", "ph": ph, "pid": 0,
            "tid": 1, "ts": ts, "id2": {"local": name}, "args": args}


READY = {"name": "READY", "cat": "negotiation", "ph": "i", "pid": 0, "tid": 2, "ts": 130.0, "s": "t",
         "args": {"rank": 0, "step": 0, "process_set": 0, "tensors": ["grad.a", "grad.b"]}}
FUSED = {"name": "FUSED_RESPONSE", "cat": "fusion", "ph": "X", "pid": 0, "tid": 3, "ts": 300.0, "dur": 150.0,
         "args": {"response": 0, "tensors": ["grad.a", "grad.b"], "count": 2, "bytes": 4160, "dtype": "float32",
                  "op": "ALLREDUCE", "backend": "ring", "threshold": 1 << 20, "process_set": 0, "step": 0,
                  "queue_ns": 50_000}}
SYNC = {"name": "SYNCHRONIZE", "cat": "framework", "ph": "X", "pid": 0, "tid": 1, "ts": 150.0, "dur": 340.0,
        "args": {"tensors": ["grad.a", "grad.b"], "step": 0}}
STEP = {"name": "STEP", "cat": "framework", "ph": "X", "pid": 0, "tid": 1, "ts": 90.0, "dur": 610.0,
        "args": {"step": 0}}


def _counter(ts, value):
    return {"name": "queue_depth", "cat": "counter", "ph": "C", "pid": 0, "tid": 0, "ts": ts, "args": {"value": value}}


def format3_events():
    """In file order: grad.b in flight at a flush (B ... E), a generic async slice, grad.a finished (X,
    written at its end, after the response), grad.a again failing (X with error), grad.c never ending
    (B only, its thread named after it)."""
    return [*_thread(1001, "grad.b"), _life("B", "grad.b", 1001, 120.0, _args("grad.b", 4096, 0, 3)), READY,
            _async("b", "load_batch", 140.0, {"step": 0}), FUSED,
            *_thread(1000, "grad.a"), _life("X", "grad.a", 1000, 100.0, _args("grad.a", 64, 0, 3), dur=400.0),
            _life("E", "grad.b", 1001, 480.0, {"step": 0}), _async("e", "load_batch", 490.0, {"step": 0}),
            SYNC, _counter(150.0, 2),
            _life("X", "grad.a", 1000, 600.0, {**_args("grad.a", 64, 1, 3), "error": "stalled"}, dur=100.0),
            _life("B", "grad.c", 1002, 800.0, _args("grad.c", 16, 1, 3)), *_thread(1002, "grad.c"),
            _counter(950.0, 1), STEP]


def format2_events():
    """The same ops as format-2 async b/e pairs, begins in the same file order."""
    return [_async("b", "grad.b", 120.0, _args("grad.b", 4096, 0, 2)), READY,
            _async("b", "load_batch", 140.0, {"step": 0}), FUSED,
            _async("b", "grad.a", 100.0, _args("grad.a", 64, 0, 2)), _async("e", "grad.a", 500.0, {"step": 0}),
            _async("e", "grad.b", 480.0, {"step": 0}), _async("e", "load_batch", 490.0, {"step": 0}),
            SYNC, _counter(150.0, 2),
            _async("b", "grad.a", 600.0, _args("grad.a", 64, 1, 2)),
            _async("e", "grad.a", 700.0, {"step": 1, "error": "stalled"}),
            _async("b", "grad.c", 800.0, _args("grad.c", 16, 1, 2)), _counter(950.0, 1), STEP]


def _sorted(df):
    return df.sort_values(list(df.columns), ignore_index=True)


def _both(p):
    """(fast, slow) tables of one file, after checking the fast path did read it."""
    assert load_ringscope._parse_fast(TraceReader(p)) is not None
    fast, slow = parse_file(p, warn=False, fast=True), parse_file(p, warn=False, fast=False)
    _same(fast, slow)
    return fast, slow


def test_format3_fast_equals_slow_and_format2(tmp_path):
    p3 = tracegen.write_rank(tmp_path / "f3.json", 0, 1, format3_events(), fmt=3)
    p2 = tracegen.write_rank(tmp_path / "f2.json", 0, 1, format2_events(), fmt=2)
    fast3, _ = _both(p3)
    fast2, _ = _both(p2)
    for t in TABLES:
        x, y = (fast3[t], fast2[t]) if t != "events" else (_sorted(fast3[t]), _sorted(fast2[t]))
        pd.testing.assert_frame_equal(x, y, obj=t)
    assert fast3["rank_info"] == {**fast2["rank_info"], "file": str(p3)}


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "slow"])
def test_format3_tensor_ops_values(tmp_path, fast):
    p = tracegen.write_rank(tmp_path / "f3.json", 0, 1, format3_events(), fmt=3)
    out = parse_file(p, warn=False, fast=fast)
    ops = out["tensor_ops"]
    assert ops["tensor"].tolist() == ["grad.b", "load_batch", "grad.a", "grad.a", "grad.c"]
    assert ops["occurrence"].tolist() == [0, 0, 0, 1, 0] and ops["step"].tolist() == [0, 0, 0, 1, 1]
    assert ops["submit_ns"].tolist() == [120_000, 140_000, 100_000, 600_000, 800_000]
    assert ops["done_ns"].tolist() == [480_000, 490_000, 500_000, pd.NA, pd.NA]
    assert ops["error"].tolist() == [pd.NA, pd.NA, pd.NA, "stalled", pd.NA]
    assert ops["response"].tolist() == [0, -1, 0, -1, -1]
    assert ops["negotiated_ns"].tolist() == [250_000, pd.NA, 250_000, 700_000, pd.NA]
    assert ops["start_ns"].tolist() == [300_000, pd.NA, 300_000, pd.NA, pd.NA]
    assert ops["wait_ns"].tolist() == [340_000, pd.NA, 340_000, pd.NA, pd.NA]
    assert ops["bytes"].tolist() == [4096, pd.NA, 64, 64, 16]
    assert ops["op"].tolist() == ["ALLREDUCE", pd.NA, "ALLREDUCE", "ALLREDUCE", "ALLREDUCE"]
    ev = out["events"]
    tensors = ev[ev["name"].str.startswith("grad.")]
    assert (tensors["thread"] == "tensor").all() and (tensors["depth"] == 0).all()  # no span rows of X lifecycles
    assert tensors["dur_ns"].tolist() == [400_000, 360_000, 100_000, 151_000]  # grad.c open until the last event
    assert (ev["name"] == "QUEUE").sum() == 2 and (ev["name"] == "NEGOTIATE_ALLREDUCE").sum() == 3
    assert ev[ev["thread"] == "framework"]["name"].tolist() == ["STEP", "SYNCHRONIZE", "ringscope.shutdown"]
    assert out["meta"]["_last_local_ns"] == 951_000   # the SHUTDOWN instant


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "slow"])
def test_truncated_format3_loads_its_complete_events(tmp_path, fast):
    """Cut inside grad.b's E line: what came before loads (grad.b still open), as from a file holding
    only those lines."""
    events = format3_events()
    p = tracegen.write_rank(tmp_path / "cut.json", 0, 1, events, fmt=3)
    data = p.read_bytes()
    at = data.index(b'"ph": "E"')
    p.write_bytes(data[:at])
    k = next(i for i, e in enumerate(events) if e["ph"] == "E")
    ref = tracegen.write_rank(tmp_path / "ref.json", 0, 1, events[:k], fmt=3, close=False, shutdown=False)
    cut, whole = parse_file(p, warn=False, fast=fast), parse_file(ref, warn=False, fast=fast)
    assert cut["rank_info"]["truncated"]
    for t in TABLES:
        pd.testing.assert_frame_equal(cut[t], whole[t], obj=t)
    ops = cut["tensor_ops"]
    assert ops["tensor"].tolist() == ["grad.b", "load_batch", "grad.a"]
    assert ops["done_ns"].tolist() == [pd.NA, pd.NA, 500_000]
    _same(parse_file(p, warn=False, fast=True), parse_file(p, warn=False, fast=False))


def test_nsys_fixture_reads_format3(tmp_path):
    """The synthetic Nsight fixture finds the same tensor slices (and no extra spans) in both formats."""
    from viewer.nsys import fixture

    slices, ranges = {}, {}
    for fmt, events in ((3, format3_events()), (2, format2_events())):
        p = tracegen.write_rank(tmp_path / f"f{fmt}.json", 0, 1, events, fmt=fmt)
        slices[fmt] = sorted(s[:4] for s in fixture._pairs_async(fixture.read_trace(p)[1]))
        ranges[fmt] = fixture.build([p], tmp_path / f"nsys{fmt}").nvtx_ranges[0]
    assert slices[3] == slices[2]
    assert ("grad.a", "grad.a", 100.0, 500.0) in slices[3] and ("QUEUE", "grad.b", 250.0, 300.0) in slices[3]
    assert ranges[3] == ranges[2] == len(slices[2]) + 3   # + FUSED_RESPONSE, SYNCHRONIZE and STEP
