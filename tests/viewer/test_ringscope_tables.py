"""One rank's tables from a small hand-written format-3 trace (a thread per tensor; an op is one X, or
B/E), and what the loader does with damaged lines."""
from __future__ import annotations

import pandas as pd
import pytest

from tests.viewer import tracegen
from viewer.errors import TraceError
from viewer.ringscope.tables import parse_file

TABLES = ("events", "tensor_ops", "fused_ops", "readiness", "cycles")


def _args(tensor, nbytes, step, fmt=3):
    return {"op": "ALLREDUCE", "bytes": nbytes, "dtype": "float32", "shape": [nbytes // 4], "reduce_op": "Sum",
            "process_set": 0, "step": step}


def _thread(tid, tensor):
    return [{"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": tensor}},
            {"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": tid, "args": {"sort_index": tid}}]


def _life(ph, tensor, tid, ts, args, dur=None):
    ev = {"name": tensor, "cat": "tensor", "ph": ph, "pid": 0, "tid": tid, "ts": ts, "args": args}
    if dur is not None:
        ev["dur"] = dur
    return ev


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
    """In file order: grad.b in flight at a flush (B ... E), grad.a finished (X, written at its end,
    after the response), grad.a again failing (X with error), grad.c never ending (B only, its thread
    named after it)."""
    return [*_thread(1001, "grad.b"), _life("B", "grad.b", 1001, 120.0, _args("grad.b", 4096, 0)), READY, FUSED,
            *_thread(1000, "grad.a"), _life("X", "grad.a", 1000, 100.0, _args("grad.a", 64, 0), dur=400.0),
            _life("E", "grad.b", 1001, 480.0, {"step": 0}), SYNC, _counter(150.0, 2),
            _life("X", "grad.a", 1000, 600.0, {**_args("grad.a", 64, 1), "error": "stalled"}, dur=100.0),
            _life("B", "grad.c", 1002, 800.0, _args("grad.c", 16, 1)), *_thread(1002, "grad.c"),
            _counter(950.0, 1), STEP]


def test_tensor_ops_values(tmp_path):
    p = tracegen.write_rank(tmp_path / "f3.json", 0, 1, format3_events())
    out = parse_file(p, warn=False)
    ops = out["tensor_ops"]
    assert ops["tensor"].tolist() == ["grad.b", "grad.a", "grad.a", "grad.c"]
    assert ops["occurrence"].tolist() == [0, 0, 1, 0] and ops["step"].tolist() == [0, 0, 1, 1]
    assert ops["submit_ns"].tolist() == [120_000, 100_000, 600_000, 800_000]
    assert ops["done_ns"].tolist() == [480_000, 500_000, pd.NA, pd.NA]
    assert ops["end_ns"].tolist() == [480_000, 500_000, 700_000, pd.NA]  # the failed op did end
    assert ops["error"].tolist() == [pd.NA, pd.NA, "stalled", pd.NA]
    assert ops["response"].tolist() == [0, 0, -1, -1]
    assert ops["negotiated_ns"].tolist() == [250_000, 250_000, 700_000, pd.NA]
    assert ops["start_ns"].tolist() == [300_000, 300_000, pd.NA, pd.NA]
    assert ops["wait_ns"].tolist() == [340_000, 340_000, pd.NA, pd.NA]
    assert ops["bytes"].tolist() == [4096, 64, 64, 16]
    assert ops["op"].tolist() == ["ALLREDUCE"] * 4
    ev = out["events"]
    tensors = ev[ev["name"].str.startswith("grad.")]
    assert (tensors["thread"] == "tensor").all() and (tensors["depth"] == 0).all()
    assert tensors["dur_ns"].tolist() == [400_000, 360_000, 100_000, 151_000]  # grad.c open until the last event
    assert (ev["name"] == "QUEUE").sum() == 2 and (ev["name"] == "NEGOTIATE_ALLREDUCE").sum() == 3
    assert ev[ev["thread"] == "framework"]["name"].tolist() == ["STEP", "SYNCHRONIZE", "ringscope.shutdown"]
    info = out["rank_info"]
    assert info["closed"] and not info["truncated"] and info["last_ts_ns"] == 951_000  # the SHUTDOWN instant
    assert out["readiness"]["tensor"].tolist() == ["grad.a", "grad.b"]


def test_truncated_loads_its_complete_events(tmp_path):
    """Cut inside grad.b's E line: what came before loads (grad.b still open), as from a file holding
    only those lines."""
    events = format3_events()
    p = tracegen.write_rank(tmp_path / "cut.json", 0, 1, events)
    data = p.read_bytes()
    at = data.index(b'"ph": "E"')
    p.write_bytes(data[:at])
    k = next(i for i, e in enumerate(events) if e["ph"] == "E")
    ref = tracegen.write_rank(tmp_path / "ref.json", 0, 1, events[:k], close=False, shutdown=False)
    cut, whole = parse_file(p, warn=False), parse_file(ref, warn=False)
    assert cut["rank_info"]["truncated"] and not cut["rank_info"]["closed"]
    assert cut["meta"]["_stop_offset"] < len(data)
    for t in TABLES:
        pd.testing.assert_frame_equal(cut[t], whole[t], obj=t)
    ops = cut["tensor_ops"]
    assert ops["tensor"].tolist() == ["grad.b", "grad.a"]
    assert ops["done_ns"].tolist() == [pd.NA, 500_000]


@pytest.mark.parametrize("version", [1, 2])
def test_old_formats_are_refused_in_one_line(tmp_path, version):
    p = tracegen.write_rank(tmp_path / "old.json", 0, 1, format3_events(), fmt=version)
    with pytest.raises(TraceError) as ei:
        parse_file(p, warn=False)
    assert str(p) in str(ei.value) and f"format {version}" in str(ei.value) and "\n" not in str(ei.value)


def test_damaged_lines_in_the_middle_are_skipped_and_reported(tmp_path):
    """A cut line, a wrong type and two glued events mid-file: the rest of the file still loads, and
    each damaged line is reported with its number, why and the events lost."""
    p = tracegen.write_rank(tmp_path / "ok.json", 0, 1, format3_events())
    lines = p.read_bytes().split(b"\n")
    fused = next(i for i, x in enumerate(lines) if b"FUSED_RESPONSE" in x)
    sync = next(i for i, x in enumerate(lines) if b"SYNCHRONIZE" in x)
    step = next(i for i, x in enumerate(lines) if b'"STEP"' in x)
    bad = list(lines)
    bad[fused] = bad[fused][:40]                                   # cut mid-event
    bad[sync] = bad[sync].replace(b'"ts": 150.0', b'"ts": "150"')  # a string time
    bad[step - 1] = bad[step - 1].rstrip(b",") + bad[step]         # two events glued together
    del bad[step]
    q = tmp_path / "bad.json"
    q.write_bytes(b"\n".join(bad))
    good, out = parse_file(p, warn=False), parse_file(q, warn=False)
    skipped = out["meta"]["_skipped"]
    assert [(s["line"], s["events"]) for s in skipped] == [(fused + 1, 1), (sync + 1, 1), (step, 0)]
    assert "not valid JSON" in skipped[0]["reason"] and "'ts'" in skipped[1]["reason"]
    assert out["rank_info"]["events_skipped"] == 2 and out["rank_info"]["closed"]
    names = out["events"]["name"].tolist()
    assert "FUSED_RESPONSE" not in names and "SYNCHRONIZE" not in names
    def written(t):   # rows of lines in the file (not the phases rebuilt from the response)
        return (~t["name"].isin(["QUEUE", "NEGOTIATE_ALLREDUCE"])).sum()
    assert written(out["events"]) == written(good["events"]) - 2
    assert out["events"]["name"].iloc[-1] == "ringscope.shutdown" and "STEP" in names


def test_values_out_of_range_are_dropped_not_overflowed(tmp_path):
    ev = format3_events()
    ev.append({"name": "STEP", "cat": "framework", "ph": "X", "pid": 0, "tid": 1, "ts": 2 ** 64, "dur": 1.0,
               "args": {"step": 9}})
    p = tracegen.write_rank(tmp_path / "big.json", 0, 1, ev)
    out = parse_file(p, warn=False)
    assert out["events"]["t_ns"].max() < 10 ** 12 and 9 not in out["events"]["step"].tolist()
    assert out["rank_info"]["events_skipped"] == 2   # that STEP and the SHUTDOWN written after it
