"""Priority inversions (viewer.analyses.priorities) on a real 2-rank traced run, and each cause."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.mpi_util import run_mpi
from viewer import Run, frames
from viewer.analyses import priorities
from viewer.findings.runtime import priority_rows

SCRIPT = Path(__file__).parent / "scripts" / "priority_waits.py"
STEPS = 3
LATE_MS = 150   # rank 1's "hi" comes long after "lo" was decided, even on a loaded machine


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("prio")
    proc = run_mpi(2, [SCRIPT], env={"RINGSCOPE_TIMELINE": str(d / "trace") + "/", "STEPS": STEPS,
                                     "LATE_MS": LATE_MS}, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return Run.load(d / "trace", cache=False)


def test_priorities_loaded(run):
    ops, fo = run.tensor_ops, run.fused_ops
    assert set(zip(ops["tensor"], ops["priority"])) == {("lo", 0), ("hi", 5)}
    assert sorted(set(fo["priority"].tolist())) == [0, 5]


def test_high_priority_waited_behind_low_on_the_early_rank(run):
    waits = priorities.waits_behind_lower(run.tensor_ops, run.fused_ops)
    early = waits[waits["rank"] == 0]
    assert sorted(early["step"]) == list(range(STEPS)), waits
    assert set(early["tensor"]) == {"hi"} and set(early["cause"]) == {"not_ready"}
    assert set(early["last_rank"]) == {1} and set(early["lower_priority"]) == {0}
    lo = run.fused_ops[(run.fused_ops["rank"] == 0) & (run.fused_ops["priority"] == 0)]
    for w in early.itertuples():
        resp = lo[lo["step"] == w.step].iloc[0]
        # the whole low-priority response ran inside hi's wait: it started after hi's submission
        assert w.behind_ns == resp["end_ns"] - resp["start_ns"] > 0
    # rank 1 submitted "hi" LATE_MS after "lo": if "lo" was still running, that is the only cause
    assert set(waits.loc[waits["rank"] == 1, "cause"]) <= {"running"}
    f = run.findings()
    msg = f.loc[f["kind"] == "priority", "message"].tolist()
    assert len(msg) == 1 and "hi (priority 5, rank 0" in msg[0] and "rank 1 submitted it last" in msg[0], msg


def _tables(op_rows, fused_rows):
    return frames.build("tensor_ops", pd.DataFrame(op_rows).to_dict("list")), \
        frames.build("fused_ops", pd.DataFrame(fused_rows).to_dict("list"))


def _op(rank, tensor, prio, submit, start, response, negotiated=None):
    return {"rank": rank, "tensor": tensor, "step": 0, "occurrence": 0, "priority": prio,
            "submit_ns": submit, "negotiated_ns": start if negotiated is None else negotiated,
            "start_ns": start, "response": response, "process_set": 0}


def _resp(rank, response, prio, start, end):
    return {"rank": rank, "response": response, "priority": prio, "start_ns": start, "end_ns": end}


def test_causes_running_and_ordered_ahead():
    # rank 0: "hi" submitted at 100 while response 1 (prio 0) runs 50-150; both ranks have "hi" by
    # 110, yet response 2 (prio 1, decided at 120) runs 160-200 before "hi"'s own response 3 at 210
    ops, fused = _tables(
        [_op(0, "hi", 2, 100, 210, 3), _op(1, "hi", 2, 110, 210, 3), _op(0, "a", 0, 0, 50, 1),
         _op(1, "a", 0, 0, 50, 1), _op(0, "b", 1, 90, 160, 2, 120), _op(1, "b", 1, 90, 160, 2, 125)],
        [_resp(r, 1, 0, 50, 150) for r in (0, 1)] + [_resp(r, 2, 1, 160, 200) for r in (0, 1)]
        + [_resp(r, 3, 2, 210, 220) for r in (0, 1)])
    waits = priorities.waits_behind_lower(ops, fused)
    b = waits[waits["tensor"] == "b"]   # "b" (prio 1) submitted at 90 waited behind response 1 too
    assert b["running_ns"].tolist() == [60, 60] and set(b["cause"]) == {"running"}
    w = waits[waits["tensor"] == "hi"].set_index("rank")
    assert w.loc[0, "running_ns"] == 50 and w.loc[0, "ordered_ahead_ns"] == 40
    assert w.loc[0, "behind_ns"] == 90 and w.loc[0, "cause"] == "running" and w.loc[0, "responses"] == 2
    assert w.loc[1, "running_ns"] == 40 and w.loc[1, "ordered_ahead_ns"] == 40
    assert w.loc[0, "lower_priority"] == 1 and w.loc[1, "last_rank"] == 1
    (f,) = priority_rows(waits)
    assert f["severity"] == "medium" and f["message"].startswith("4 prioritised op(s) waited"), f


def test_nothing_without_priorities():
    ops, fused = _tables([_op(0, "a", 0, 0, 50, 1), _op(0, "b", 0, 10, 60, 2)],
                         [_resp(0, 1, 0, 50, 55), _resp(0, 2, 0, 60, 70)])
    assert not len(priorities.waits_behind_lower(ops, fused))
    assert priority_rows(priorities.waits_behind_lower(ops, fused)) == []
