"""Findings after real faults: 4 real ranks on collectives, one of them killed mid-training.

Two launches, shared by every test here:
- ``killed``: rank 0 SIGKILLs itself; mpiexec then kills the other ranks at once, so every trace is
  cut at its last flush and none can tell who died first. No finding may blame a rank that was not
  killed (before, an unflushed tail made a survivor look like it never submitted a tensor).
- ``died``: rank 2 stops mid-step and is SIGKILLed after the others gave up on it: the stall
  shutdown failed their ops after 2 s, they went on 1.5 s more and closed their traces. Its trace is
  the one that stopped first (earliest last event, not closed), and the finding names it.
"""
from __future__ import annotations

import re
import warnings

import pytest

from tests.dashboard.conftest import Server, artifacts, browser, free_port, page  # noqa: F401 (fixtures)
from tests.mpi_util import SCRIPTS, run_mpi
from viewer.analyses import hangs
from viewer.run import Run
from viewer.schema import RunTables

STALL_S, AFTER_S = 2.0, 1.5


def launch(run_dir, fault: str, victim: int):
    env = {"RINGSCOPE_TIMELINE": f"{run_dir}/", "RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS": STALL_S,
           "FAULT": fault, "VICTIM": victim, "FAULT_AFTER_S": 1.2, "AFTER_ERROR_S": AFTER_S}
    run_dir.mkdir()
    proc = run_mpi(4, [SCRIPTS / "faults_kill.py"], env=env, timeout=120)
    assert len(list(run_dir.glob("rank-*.json"))) == 4, proc.stdout[-3000:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the cut traces' warnings: asserted through the tables
        return Run.load(run_dir, cache=False), proc


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("faults")
    killed, kproc = launch(base / "killed", "kill", 0)
    died, dproc = launch(base / "died", "freeze", 2)
    assert "BAD TERMINATION" in kproc.stdout   # mpiexec saw rank 0 die and took the job down
    assert dproc.stdout.count("stall shutdown") == 3, dproc.stdout[-3000:]   # each survivor failed once
    return {"killed": killed, "died": died}


def blamed(findings) -> set:
    """Ranks a finding holds responsible ("rank N never submitted", "rank N stopped first")."""
    return {int(m) for msg in findings["message"]
            for m in re.findall(r"rank (\d+) (?:never submitted|stopped first)", msg)}


def test_a_job_killed_as_a_whole_blames_no_rank_that_was_not_killed(runs):
    run = runs["killed"]
    ends = hangs.rank_ends(run.tables)
    assert not ends["closed"].any() and hangs.stopped_first(ends) is None
    lo, hi = hangs.cut_together(ends)
    assert hi - lo < hangs.STOP_GAP_NS
    found = run.findings()
    assert blamed(found) <= {0}, found["message"].tolist()
    msg = " ".join(found["message"])
    assert "all 4 traces stop unclosed within" in msg and "cannot tell which rank failed first" in msg
    # a rank is only counted missing where its own trace still ran when the others submitted
    h = run.hangs()
    for row in h[h["kind"] == "missing"].itertuples():
        for r in row.missing_ranks:
            assert ends.set_index("rank").loc[r, "last_ns"] >= row.first_submit_ns


def test_the_rank_that_died_is_the_one_that_stopped_first_and_is_named(runs):
    run = runs["died"]
    ends = hangs.rank_ends(run.tables)
    assert ends.iloc[0]["rank"] == 2 and not ends.iloc[0]["closed"] and ends.iloc[1:]["closed"].all()
    dead = hangs.stopped_first(ends)
    assert dead["rank"] == 2 and dead["lead_ns"] > STALL_S * 1e9
    found = run.findings()
    assert found.iloc[0]["kind"] == "rank_died", found["message"].tolist()
    assert found.iloc[0]["message"].startswith("rank 2 stopped first: its trace ends")
    assert "rank(s) 0, 1, 3 waited" in found.iloc[0]["message"]
    assert blamed(found) == {2}, found["message"].tolist()


def with_failure_ends(tables: RunTables) -> RunTables:
    """The tables with ``tensor_ops.end_ns`` as the loader gives it (the end line of each op, a failed
    one included), taken here from the op's own span in the events table where the loader lacks it."""
    ops = tables.tensor_ops.copy()
    if "end_ns" in ops and ops.loc[ops["error"].notna(), "end_ns"].notna().all():
        return tables
    ev = tables.events
    spans = ev[(ev["thread"] == "tensor") & (ev["name"] == ev["tensor"])]
    end = dict(zip(zip(spans["rank"], spans["tensor"], spans["step"]), spans["t_ns"] + spans["dur_ns"]))
    failed = ops["error"].notna()
    ops["end_ns"] = ops["done_ns"]
    ops.loc[failed, "end_ns"] = [end[k] for k in zip(ops.loc[failed, "rank"], ops.loc[failed, "tensor"],
                                                     ops.loc[failed, "step"])]
    return RunTables(**{**tables.__dict__, "tensor_ops": ops})


def test_a_stall_shutdown_wait_is_measured_to_the_failure_not_to_the_trace_end(runs):
    tables = with_failure_ends(runs["died"].tables)
    h = hangs.incomplete_tensors(tables, size=4)
    failed = h[h["failed"]]
    assert len(failed) == 8   # the 8 gradients of the step rank 2 never finished submitting
    to_end = tables.meta["end_ns"] - failed["first_submit_ns"]
    assert (to_end > (STALL_S + AFTER_S - 0.2) * 1e9).all()   # the traces went on after the failure
    assert failed["waited_ns"].between(STALL_S * 1e9 * 0.95, STALL_S * 1e9 * 1.25).all(), failed["waited_ns"]
    msg = Run(tables).findings().iloc[0]["message"]
    waited = float(re.search(r"waited ([\d.]+) s for it", msg).group(1))
    assert STALL_S * 0.95 <= waited <= STALL_S * 1.25 and "until the stall shutdown failed it" in msg, msg


def test_the_dashboard_names_the_rank_that_died(runs, page, artifacts, tmp_path):  # noqa: F811
    port = free_port()
    srv = Server(["-m", "viewer.cli", "view", str(runs["died"].source), "--port", str(port)], port,
                 tmp_path / "log")
    try:
        page.goto(srv.url)
        page.wait_for_selector("#findings .finding", timeout=60_000)
        page.wait_for_selector("#card-straggler .card-value", timeout=60_000)
        first = page.locator("#findings .finding").first.text_content()   # its detail folded too
        assert "rank 2 stopped first" in first and "rank(s) 0, 1, 3 waited" in first
        if "end_ns" in runs["died"].tensor_ops:   # the loader gives a failed op's end: the wait ends there
            waited = float(re.search(r"waited ([\d.]+) s for it", first).group(1))
            assert STALL_S * 0.95 <= waited <= STALL_S * 1.25, first
        page.screenshot(path=str(artifacts / "faults-rank-died.png"), full_page=True)
        assert page.errors == []
    finally:
        srv.stop()
