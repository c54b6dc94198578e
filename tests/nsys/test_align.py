"""Clock alignment: session start first, then refined on the NVTX ranges both sides recorded."""
from __future__ import annotations

import shutil
import sqlite3

import pytest

from viewer.nsys.attach import attach_nsys
from viewer.nsys.errors import NsysError

TOL_NS = 10_000   # the bar: offset recovered within 10 µs


def test_offset_recovered_per_rank(overlay, per_rank):
    truth, _ = per_rank
    assert sorted(overlay.ranks) == [0, 1]
    for r, info in overlay.ranks.items():
        assert info["method"] == "nvtx"
        # the synthetic clock error is nsys UTC minus rank wall clock: refinement must undo it
        assert abs(info["residual_ns"] + truth.clock_error_ns[r]) < TOL_NS, info
        assert info["matched"] >= 20
        assert info["spread_ns"] < TOL_NS
    assert overlay.warnings == []


def test_offset_recovered_from_one_combined_report(run, combined):
    truth, path = combined
    ov = attach_nsys(run.tables, [path])
    assert sorted(ov.ranks) == [0, 1]
    for r, info in ov.ranks.items():
        assert info["how"] == "nvtx" and info["pid"] == truth.pids[r]
        assert abs(info["residual_ns"] + truth.clock_error_ns[r]) < TOL_NS, info


def test_capture_started_late(run, per_rank, tmp_path):
    """nsys attached after the run began: the first third of its NVTX ranges are missing."""
    truth, _ = per_rank
    p = tmp_path / "late.sqlite"
    shutil.copy(truth.files[1], p)
    con = sqlite3.connect(p)
    (n,) = con.execute("select count(*) from NVTX_EVENTS where eventType = 60").fetchone()
    cut = con.execute("select start from NVTX_EVENTS where eventType = 60 order by start "
                      "limit 1 offset ?", (n // 3,)).fetchone()[0]
    con.execute("delete from NVTX_EVENTS where eventType = 60 and start < ?", (cut,))
    con.commit()
    con.close()
    ov = attach_nsys(run.tables, [p])
    info = ov.ranks[1]
    assert info["method"] == "nvtx"
    assert abs(info["residual_ns"] + truth.clock_error_ns[1]) < TOL_NS, info


def test_too_few_matches_falls_back_with_a_warning(run, per_rank):
    truth, _ = per_rank
    ov = attach_nsys(run.tables, [truth.files[0]], min_matches=10**6)
    info = ov.ranks[0]
    assert info["method"] == "session-start" and info["offset_ns"] == info["coarse_ns"]
    assert len(ov.warnings) == 1 and "session start" in ov.warnings[0]
    assert ov.warnings[0].startswith(truth.files[0])
    # session start alone is off by exactly the injected clock error
    k = ov.aligned
    ref = attach_nsys(run.tables, [truth.files[0]]).aligned
    shift = (k["t_ns"].to_numpy() - ref["t_ns"].to_numpy())
    assert abs(shift.mean() - truth.clock_error_ns[0]) < TOL_NS


def test_mapping_by_pid_when_no_rank_mark(run, trace_files, tmp_path):
    from tests.nsys import fixture

    truth = fixture.build(trace_files, tmp_path, mark_rank=False)
    ov = attach_nsys(run.tables, sorted(truth.files.values()))
    assert {r: i["how"] for r, i in ov.ranks.items()} == {0: "pid", 1: "pid"}
    assert all(abs(i["residual_ns"] + truth.clock_error_ns[r]) < TOL_NS for r, i in ov.ranks.items())


def test_explicit_rank_mapping(run, trace_files, tmp_path):
    from tests.nsys import fixture

    truth = fixture.build(trace_files, tmp_path, mark_rank=False)
    ov = attach_nsys(run.tables, [f"0={truth.files[0]}", f"1={truth.files[1]}"])
    assert {r: (i["how"], i["file"]) for r, i in ov.ranks.items()} == {
        0: ("explicit", truth.files[0]), 1: ("explicit", truth.files[1])}


def test_two_processes_claiming_one_rank(run, per_rank):
    truth, _ = per_rank
    with pytest.raises(NsysError) as e:
        attach_nsys(run.tables, [f"0={truth.files[0]}", f"0={truth.files[1]}"])
    assert "both map to rank 0" in str(e.value) and "\n" not in str(e.value)
