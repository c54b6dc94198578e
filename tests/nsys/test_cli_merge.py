"""``ringscope merge RUN_DIR --nsys ...``: GPU lanes in the merged Chrome trace, clean errors."""
from __future__ import annotations

import json
import sqlite3

import pytest

from viewer.cli import main


def _load(p):
    return json.loads(p.read_text())["traceEvents"]


def test_merge_with_nsys_lanes(run_dir, per_rank, tmp_path, capsys):
    truth, _ = per_rank
    out = tmp_path / "merged.json"
    rc = main(["merge", str(run_dir), "--nsys", truth.files[0], truth.files[1], "-o", str(out)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "nsys rank 0:" in cap.out and "nsys rank 1:" in cap.out and "aligned by nvtx" in cap.out
    evs = _load(out)
    lanes = {(e["pid"], e["args"]["name"]) for e in evs if e.get("name") == "thread_name"}
    assert {(0, "gpu:13"), (1, "gpu:13"), (0, "gpu:7"), (1, "gpu:7")} <= lanes
    # every NCCL kernel sits inside its rank's backend activity of the same response
    back = {(e["pid"], e["args"]["response"]): (e["ts"], e["ts"] + e["dur"]) for e in evs
            if e.get("ph") == "X" and e.get("cat") == "comm" and e["name"].endswith("ALLREDUCE")}
    nccl = [e for e in evs if e.get("ph") == "X" and e.get("cat") == "nccl"]
    assert len(nccl) == sum(1 for p in truth.kernels if p.nccl)
    for k in nccl:
        t0, t1 = back[(k["pid"], k["args"]["response"])]
        assert t0 <= k["ts"] and k["ts"] + k["dur"] <= t1 + 1e-3, (k, t0, t1)


def test_merge_with_explicit_rank_files(run_dir, per_rank, tmp_path, capsys):
    truth, _ = per_rank
    out = tmp_path / "merged.json"
    rc = main(["merge", str(run_dir), "--nsys", f"1={truth.files[1]}", "--nsys", f"0={truth.files[0]}",
               "-o", str(out)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert cap.out.count("mapped by explicit") == 2


def test_merge_rejects_bad_exports(run_dir, trace_files, tmp_path, capsys):
    out = tmp_path / "merged.json"
    rc = main(["merge", str(run_dir), "--nsys", str(trace_files[0]), "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0
    assert str(trace_files[0]) in err and "not an SQLite file" in err
    bare = tmp_path / "bare.sqlite"
    con = sqlite3.connect(bare)
    con.execute("create table StringIds (id integer primary key, value text)")
    con.commit()
    con.close()
    rc = main(["merge", str(run_dir), "--nsys", str(bare), "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and "missing table" in err and str(bare) in err
    assert not out.exists()


def test_merged_trace_with_gpu_lanes_loads_cleanly_in_perfetto(run_dir, per_rank, tmp_path, capsys):
    """The real Perfetto UI imports the merged trace with its GPU lanes without errors or data loss."""
    import pytest

    from tests.tracer.perfetto_util import chromium_missing_reason, perfetto

    reason = chromium_missing_reason()
    if reason:
        pytest.skip(f"Perfetto check needs a browser: {reason}")
    truth, _ = per_rank
    out = tmp_path / "merged.json"
    assert main(["merge", str(run_dir), "--nsys", truth.files[0], truth.files[1], "-o", str(out)]) == 0
    capsys.readouterr()
    with perfetto(out, screenshot=tmp_path / "merged.png") as ui:
        assert ui.problems == [], f"Perfetto import problems: {ui.problems}"


EXTREMES = (2 ** 63 - 1, -2 ** 63, 2 ** 53 + 1, -10 ** 12)
COLUMNS = [("CUPTI_ACTIVITY_KIND_KERNEL", c) for c in ("start", "end", "streamId", "deviceId", "correlationId",
                                                       "globalPid")] \
    + [("CUPTI_ACTIVITY_KIND_RUNTIME", c) for c in ("start", "end", "globalTid", "correlationId")] \
    + [("NVTX_EVENTS", c) for c in ("start", "end", "globalTid", "int64Value")] \
    + [("TARGET_INFO_SESSION_START_TIME", "utcEpochNs")]


@pytest.mark.parametrize("table,column", COLUMNS)
def test_extreme_integers_in_an_export_are_one_line_or_left_out(run_dir, per_rank, tmp_path, capsys, table, column):
    """Extreme integers in the export's integer columns (a damaged or hand-edited export): rank 0's
    export with them in a few rows merges with one error line, or places no impossible slice."""
    import shutil

    from viewer.io.ranges import MAX_US

    truth, _ = per_rank
    bad = tmp_path / "bad.sqlite"
    shutil.copy(truth.files[0], bad)
    con = sqlite3.connect(bad)
    ranges = ' where "end" is not null' if table == "NVTX_EVENTS" else ""   # not its domain and category rows
    rows = [r for (r,) in con.execute(f"select rowid from {table}{ranges} order by rowid limit 4")]
    for r, v in zip(rows, EXTREMES):
        con.execute(f"update {table} set {column} = ? where rowid = ?", (v, r))
    con.commit()
    con.close()
    out = tmp_path / "merged.json"
    rc = main(["merge", str(run_dir), "--nsys", str(bad), truth.files[1], "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    if rc == 2:
        assert err.count("\n") == 0 and str(bad) in err, err
        return
    assert rc == 0, err
    if column in ("start", "end"):   # rows with impossible times: left out, and said so
        assert f"ringscope: warning: {bad}: " in err and "left out" in err, err
    for e in _load(out):
        if e.get("ph") == "X":
            assert 0 <= e["dur"] <= MAX_US and abs(e["ts"]) <= MAX_US, e
