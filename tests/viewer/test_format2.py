"""Formats 2 and 3 (phases on the response) read into the same tables as format 1 (phases per tensor).

tracegen writes the same run in each format; both loader paths (Arrow and per-event Python) must give
equal tensor_ops and events for them.
"""
from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.viewer import tracegen
from tracer import vocab as V
from viewer.load_ringscope import parse_file

RUNS = {
    "straggler": dict(size=2, steps=3, late_rank=1),
    "broadcasts": dict(size=3, steps=4, broadcasts=True),
    "unknown_steps": dict(size=2, steps=5, broadcasts=True, unknown_steps=True),
}


def _sorted(df):
    return df.sort_values(list(df.columns), ignore_index=True)


def _both(tmp_path, rank=1, fmt=2, **kw):
    """(format-1 file, format-``fmt`` file) of the same run."""
    return tuple(tracegen.write_run(tmp_path / f"v{f}", fmt=f, **kw)[rank] for f in (1, fmt))


FMTS = pytest.mark.parametrize("fmt", [2, 3], ids=["fmt2", "fmt3"])


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "slow"])
@pytest.mark.parametrize("run", sorted(RUNS))
@FMTS
def test_format2_gives_the_format1_tables(tmp_path, run, fast, fmt):
    f1, f2 = _both(tmp_path, fmt=fmt, **RUNS[run])
    assert b'"QUEUE"' in f1.read_bytes() and b'"QUEUE"' not in f2.read_bytes()
    a, b = parse_file(f1, warn=False, fast=fast), parse_file(f2, warn=False, fast=fast)
    ops = b["tensor_ops"]
    assert len(ops) and ops["negotiated_ns"].notna().all() and ops["start_ns"].notna().all()
    assert (ops["submit_ns"] <= ops["negotiated_ns"]).all() and (ops["negotiated_ns"] < ops["start_ns"]).all()
    assert (ops["response"] >= 0).all()
    pd.testing.assert_frame_equal(a["tensor_ops"], ops)
    ev1, ev2 = _sorted(a["events"]), _sorted(b["events"])
    assert (ev2["name"] == V.QUEUE).sum() == len(ops)
    pd.testing.assert_frame_equal(ev1, ev2)
    pd.testing.assert_frame_equal(a["fused_ops"], b["fused_ops"])


@pytest.mark.parametrize("run", sorted(RUNS))
@FMTS
def test_format2_fast_equals_slow(tmp_path, run, fmt):
    f2 = tracegen.write_run(tmp_path, fmt=fmt, **RUNS[run])[0]
    fast, slow = parse_file(f2, warn=False, fast=True), parse_file(f2, warn=False, fast=False)
    for t in ("tensor_ops", "fused_ops"):
        pd.testing.assert_frame_equal(fast[t], slow[t], obj=t)
    pd.testing.assert_frame_equal(_sorted(fast["events"]), _sorted(slow["events"]))


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "slow"])
def test_repeated_step_keys_match_by_time(tmp_path, fast):
    """Every op says step -1 and the tensor names repeat: each op gets the response that ran while it
    was in flight (init broadcasts 0 and 1, then one fused response per step)."""
    p = tracegen.write_run(tmp_path, fmt=2, size=2, steps=4, broadcasts=True, unknown_steps=True)[0]
    ops = parse_file(p, warn=False, fast=fast)["tensor_ops"]
    got = ops[ops["tensor"] == "grad.a"].sort_values("submit_ns")["response"].tolist()
    assert got == [0, 2, 3, 4, 5]
    got = ops[ops["tensor"] == "grad.b"].sort_values("submit_ns")["response"].tolist()
    assert got == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "slow"])
@FMTS
def test_hang_ops_stay_unnegotiated(tmp_path, fast, fmt):
    """Rank 1 never submits grad.b in step 1: the ops of that step never get a response. Both formats
    give the same tensor_ops (NA phases for the hung ops); format 1's open NEGOTIATE slices (to the
    end of the trace) are the only extra event rows."""
    f1, f2 = _both(tmp_path, rank=0, fmt=fmt, size=2, steps=3, skip=(1, "grad.b", 1))
    a, b = parse_file(f1, warn=False, fast=fast), parse_file(f2, warn=False, fast=fast)
    pd.testing.assert_frame_equal(a["tensor_ops"], b["tensor_ops"])
    ops = b["tensor_ops"]
    hung = ops[ops["step"] == 1]
    assert len(hung) == 2 and hung["negotiated_ns"].isna().all() and hung["start_ns"].isna().all()
    assert (hung["response"] == -1).all() and ops[ops["step"] == 0]["negotiated_ns"].notna().all()
    ev1 = a["events"]
    open_neg = ev1["name"].str.startswith(V.NEGOTIATE_PREFIX) & ev1["step"].eq(1)
    assert open_neg.sum() == 2
    pd.testing.assert_frame_equal(_sorted(ev1[~open_neg]), _sorted(b["events"]))


def _failed_then_rerun(fmt_queue=True, fmt=2):
    """grad.a (step 0) fails with a stall error and no response; grad.a is submitted again (step 0
    again) and runs in response 7, which must not be taken for the failed op."""
    ev = []
    a = {"tensor": "grad.a", "op": "ALLREDUCE", "bytes": 64, "dtype": "float32", "shape": [16],
         "reduce_op": "Sum", "process_set": 0, "step": 0}
    tracegen._lifecycle(ev, 0, "grad.a", V.ALLREDUCE, a, 100.0, None, None, 500.0, 0, fmt,
                        error="stalled")
    tracegen._lifecycle(ev, 0, "grad.a", V.ALLREDUCE, a, 600.0, 650.0, 700.0, 900.0, 0, fmt)
    fa = {"response": 7, "tensors": ["grad.a"], "count": 1, "bytes": 64, "dtype": "float32", "op": "ALLREDUCE",
          "backend": "ring", "threshold": 1024, "process_set": 0, "step": 0}
    if fmt_queue and fmt >= 2:
        fa[V.ARG_QUEUE_NS] = 50_000
    ev.append({"ph": "X", "name": V.FUSED_RESPONSE, "cat": V.CAT_FUSION, "pid": 0, "tid": 3, "ts": 700.0,
               "dur": 150.0, "args": fa})
    ev.sort(key=lambda e: e["ts"])
    return ev


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "slow"])
def test_failed_op_negotiates_until_it_fails(tmp_path, fast):
    """An op that failed before any response: its negotiation ends at the failure and it has no
    QUEUE, the same in both formats; it does not take the response of the tensor's rerun."""
    got = {}
    for fmt in (1, 2, 3):
        p = tracegen.write_rank(tmp_path / f"r{fmt}.json", 0, 1, _failed_then_rerun(fmt=fmt), fmt=fmt)
        got[fmt] = parse_file(p, warn=False, fast=fast)
    ops = got[2]["tensor_ops"].sort_values("submit_ns", ignore_index=True)
    assert ops["error"].tolist()[0] == "stalled" and pd.isna(ops["error"][1])
    assert ops["response"].tolist() == [-1, 7]
    assert ops["negotiated_ns"][0] == 500_000 and pd.isna(ops["start_ns"][0])
    assert ops["negotiated_ns"][1] == 650_000 and ops["start_ns"][1] == 700_000
    for fmt in (1, 3):
        pd.testing.assert_frame_equal(got[fmt]["tensor_ops"].sort_values("submit_ns", ignore_index=True), ops)
        pd.testing.assert_frame_equal(_sorted(got[fmt]["events"]), _sorted(got[2]["events"]))


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "slow"])
def test_unknown_queue_time(tmp_path, fast):
    """A response without queue_ns: the op's start is known, its negotiation end is not, and no
    NEGOTIATE/QUEUE rows are made up."""
    p = tracegen.write_rank(tmp_path / "r.json", 0, 1, _failed_then_rerun(fmt_queue=False), fmt=2)
    out = parse_file(p, warn=False, fast=fast)
    ops = out["tensor_ops"].sort_values("submit_ns", ignore_index=True)
    assert ops["start_ns"][1] == 700_000 and pd.isna(ops["negotiated_ns"][1]) and ops["response"][1] == 7
    ev = out["events"]
    assert not (ev["name"] == V.QUEUE).any()
    neg = ev[ev["name"] == "NEGOTIATE_ALLREDUCE"]   # only the failed op's, up to its failure
    assert neg["t_ns"].tolist() == [100_000] and neg["dur_ns"].tolist() == [400_000]


def test_format_version_written(tmp_path):
    p = tracegen.write_run(tmp_path, size=1, steps=1)[0]
    head = json.loads(p.read_text().split("\n", 1)[0].rstrip(",") + "}")
    assert head["otherData"]["ringscope"]["format_version"] == V.FORMAT_VERSION == 3
    assert '"ph": "X", "name": "grad.a", "cat": "tensor"' in p.read_text()   # tracegen writes what it says


def test_batched_ready_lines(tmp_path):
    """READY lines listing several tensors (``args.tensors``) give one readiness row per tensor, mixed
    with one-tensor lines, in file order, the same in both paths."""
    p = tracegen.write_run(tmp_path, size=3, steps=2)[0]
    lines = p.read_text().split("\n")
    batched = []
    for line in lines:
        ev = json.loads(line.rstrip(",")) if line.startswith('{"ph": "i", "name": "READY"') else None
        if ev and ev["args"]["rank"] == 1:  # rank 1's ticks: one line listing its tensors
            a = ev["args"]
            a["tensors"] = [a.pop("tensor"), "grad.z"]
        batched.append(line if ev is None else json.dumps(ev) + ("," if line.endswith(",") else ""))
    p.write_text("\n".join(batched))
    fast, slow = parse_file(p, warn=False, fast=True), parse_file(p, warn=False, fast=False)
    pd.testing.assert_frame_equal(fast["readiness"], slow["readiness"])
    rd = fast["readiness"]
    assert len(rd) == 2 * 2 * 3 + 2 * 2   # 2 steps x 2 tensors x 3 ranks, plus grad.z twice per step
    one = rd[(rd["rank"] == 1) & (rd["tensor"] == "grad.a")]
    assert one["occurrence"].tolist() == [0, 1] and one["step"].tolist() == [0, 1]
    assert rd[rd["tensor"] == "grad.z"]["occurrence"].tolist() == [0, 1, 2, 3]
