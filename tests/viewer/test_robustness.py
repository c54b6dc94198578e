"""Truncated, gzipped and bad inputs: recover what is complete, fail with one line naming the file."""
from __future__ import annotations

import gzip
import subprocess
import sys
import warnings

import pytest

from tests.viewer import tracegen
from tests.viewer.conftest import ROOT, horovod_file
from viewer import Run
from viewer.errors import TraceError, TruncatedTraceWarning
from viewer.loader import load_run


def _load_warn(path):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        run = Run.load(path, cache=False)
    return run, [w for w in rec if issubclass(w.category, TruncatedTraceWarning)]


@pytest.mark.parametrize("frac", [0.3, 0.55, 0.9])
def test_cut_horovod_file_recovers_complete_events(tmp_path, frac):
    src = horovod_file("mpi_2ranks")
    data = src.read_bytes()
    full = Run.load(src, cache=False)
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: int(len(data) * frac)])
    run, ws = _load_warn(cut)
    assert len(ws) == 1
    msg = str(ws[0].message)
    assert str(cut) in msg and "stopped at byte" in msg
    offset = int(msg.split("stopped at byte ")[1].split()[0])
    assert 0 < offset <= int(len(data) * frac)
    # everything before the offset is complete JSON: the same events as the full file up to there
    assert 0 < len(run.readiness) < len(full.readiness)
    n = len(run.readiness)
    assert run.readiness["ready_ns"].tolist() == full.readiness["ready_ns"].tolist()[:n]
    assert bool(run.ranks["truncated"].iloc[0])


def test_legacy_unclosed_is_not_a_warning(tmp_path):
    src = horovod_file("legacy_7ranks")
    text = src.read_text().rstrip()
    assert text.endswith("]")
    unclosed = tmp_path / "legacy.json"
    unclosed.write_text(text[:-1].rstrip() + ",\n")  # how pre-0.20.1 Horovod leaves it
    run, ws = _load_warn(unclosed)
    assert ws == [] and len(run.readiness) == len(Run.load(src, cache=False).readiness)


def test_gzip_and_truncated_gzip(tmp_path):
    src = horovod_file("gloo_2ranks")
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    a, b = Run.load(src, cache=False), Run.load(gz, cache=False)
    assert a.tensor_ops["submit_ns"].tolist() == b.tensor_ops["submit_ns"].tolist()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gz.read_bytes()[: len(gz.read_bytes()) * 2 // 3])
    run, ws = _load_warn(cut)
    assert len(ws) == 1 and 0 < len(run.tensor_ops) < len(a.tensor_ops)


def test_ringscope_trace_cut_mid_event(tmp_path):
    """Ops complete before the cut load, the one cut off stays open (rank 1 waits for a late rank 0, so
    its ops are B/E lines)."""
    paths = tracegen.write_run(tmp_path / "run", size=2, steps=4, late_rank=0)
    data = paths[1].read_bytes()
    paths[1].write_bytes(data[: len(data) // 2 + 7])
    run, ws = _load_warn(tmp_path / "run")
    assert len(ws) == 1 and "rank-1.json" in str(ws[0].message)
    assert run.meta["truncated_ranks"] == [1]
    r1 = run.tensor_ops[run.tensor_ops["rank"] == 1]
    assert 0 < r1["done_ns"].notna().sum() < 8 and r1["done_ns"].isna().any()


@pytest.mark.parametrize("content,problem", [
    (b"", "empty file"),
    (b"hello world\n", "not JSON"),
    (b"\x00\x01\x02binary\xff" * 50, "binary data"),
    (b'{"foo": 1}', "wrong shape"),
    (b"[1, 2, 3]", "no trace events"),
    (b"[]", "no trace events"),
    (b'{"traceEvents": []}', "no trace events"),
    (b"{}", "no trace events"),
    (b"[null]", "no trace events"),
    (b'{"traceEvents": 5}', "wrong shape"),
])
def test_bad_input_one_line_error(tmp_path, content, problem):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    with pytest.raises(TraceError) as ei:
        load_run(bad, use_cache=False)
    msg = str(ei.value)
    assert str(bad) in msg and problem in msg and "\n" not in msg


def test_missing_and_empty_dir(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        load_run(tmp_path / "nope")
    with pytest.raises(TraceError, match="no trace files"):
        load_run(tmp_path)


def test_corrupt_gzip(tmp_path):
    bad = tmp_path / "x.json.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbagegarbage")
    with pytest.raises(TraceError, match="gzip"):
        load_run(bad, use_cache=False)


@pytest.mark.parametrize("cmd", ["summarize", "merge"])
def test_cli_bad_input_exit_2_no_traceback(tmp_path, cmd):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"not json at all")
    extra = ["-o", str(tmp_path / "m.json")] if cmd == "merge" else []
    for target in (bad, tmp_path / "missing.json"):
        p = subprocess.run([sys.executable, "-m", "viewer.cli", cmd, str(target), *extra], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2
        assert "Traceback" not in p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and str(target) in lines[0]


def test_multi_member_gzip_is_read_to_the_end(tmp_path):
    src = ROOT / "sample_traces" / "healthy" / "rank-00001.json.gz"
    data = gzip.decompress(src.read_bytes())
    k = len(data) // 3
    multi = tmp_path / "multi.json.gz"
    multi.write_bytes(gzip.compress(data[:k]) + gzip.compress(data[k:2 * k]) + gzip.compress(data[2 * k:]))
    a, (b, ws) = Run.load(src, cache=False), _load_warn(multi)
    assert ws == [] and len(a.events) == len(b.events) and b.ranks["closed"].all()


def test_gzip_bomb_stops_at_the_cap(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGSCOPE_MAX_TRACE_BYTES", str(4 << 20))
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (1 << 20)) * 64)   # 64 MiB expanded from 64 KiB
    with pytest.raises(TraceError) as ei:
        load_run(bomb, use_cache=False)
    assert str(bomb) in str(ei.value) and "RINGSCOPE_MAX_TRACE_BYTES" in str(ei.value)


def test_ranks_say_where_each_trace_stopped():
    """A killed or hung rank's trace is not closed; last_ts_ns is the end of its last event on the
    common axis, so the rank that stopped first can be found."""
    run = Run.load(ROOT / "sample_traces" / "hang", cache=False)
    ev = run.events
    ends = (ev["t_ns"] + ev["dur_ns"]).groupby(ev["rank"]).max()
    assert not run.ranks["closed"].any() and run.ranks["truncated"].all()
    assert run.ranks.set_index("rank")["last_ts_ns"].to_dict() == ends.to_dict()
    healthy = Run.load(ROOT / "sample_traces" / "healthy", cache=False)
    assert healthy.ranks["closed"].all() and not healthy.ranks["truncated"].any()
