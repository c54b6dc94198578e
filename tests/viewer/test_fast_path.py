"""The Arrow fast path and the per-event Python parser give identical tables (real and cut traces)."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from tests.viewer import tracegen
from viewer.load_ringscope import parse_file

TABLES = ("events", "tensor_ops", "fused_ops", "readiness", "cycles")


def _same(a, b):
    for t in TABLES:
        x, y = a[t], b[t]
        if t == "events":
            cols = list(x.columns)
            x, y = x.sort_values(cols, ignore_index=True), y.sort_values(cols, ignore_index=True)
        pd.testing.assert_frame_equal(x, y, obj=t)
    assert a["rank_info"] == b["rank_info"]
    assert a["meta"] == b["meta"]


@pytest.mark.parametrize("cut", [None, 0.37, 0.81])
def test_fast_equals_slow_on_tracegen(tmp_path, cut):
    p = tracegen.write_run(tmp_path, size=2, steps=3, late_rank=1)[1]
    if cut:
        data = p.read_bytes()
        p.write_bytes(data[: int(len(data) * cut)])
    _same(parse_file(p, warn=False, fast=True), parse_file(p, warn=False, fast=False))


def test_fast_equals_slow_on_real_run(tmp_path):
    from tests.viewer.test_real_run import SCRIPT  # noqa: F401  (same worker as the real-run tests)
    from tests.mpi_util import run_mpi

    (tmp_path / "t").mkdir()
    proc = run_mpi(2, [SCRIPT], env={"RINGSCOPE_TIMELINE": str(tmp_path / "t") + "/", "STEPS": 3,
                                     "RINGSCOPE_TIMELINE_MARK_CYCLES": "1"}, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:]
    files = sorted((tmp_path / "t").glob("*.json"))
    assert len(files) == 2
    for f in files:
        _same(parse_file(f, warn=False, fast=True), parse_file(f, warn=False, fast=False))
        data = f.read_bytes()
        cut = tmp_path / ("cut-" + f.name)
        cut.write_bytes(data[: len(data) // 2])
        _same(parse_file(cut, warn=False, fast=True), parse_file(cut, warn=False, fast=False))


def test_fast_path_falls_back_on_odd_layout(tmp_path):
    """Two events on one line: Arrow cannot read it, the Python parser can."""
    p = tracegen.write_run(tmp_path, size=1, steps=1)[0]
    text = p.read_text()
    lines = text.split("\n")
    lines[3] = lines[3] + lines[4]
    del lines[4]
    p.write_text("\n".join(lines))
    out = parse_file(p, warn=False, fast=True)
    assert len(out["tensor_ops"]) == 2 and not out["rank_info"]["truncated"]


def test_fast_path_falls_back_after_parsing(tmp_path, monkeypatch):
    """A memcpy span without its response id is found while building the tables, after the raw bytes
    were let go: the file is read again and the Python parser gives the same tables as forced slow."""
    from viewer import load_ringscope

    p = tracegen.write_run(tmp_path, size=1, steps=2)[0]
    lines = p.read_text().split("\n")
    i = next(k for k, line in enumerate(lines) if '"MEMCPY_IN_FUSION_BUFFER"' in line)
    lines[i] = lines[i].replace('"response"', '"response_id"')
    p.write_text("\n".join(lines))
    reads = []

    class Counting(load_ringscope.TraceReader):
        def __init__(self, path):
            reads.append(path)
            super().__init__(path)

    monkeypatch.setattr(load_ringscope, "TraceReader", Counting)
    fast = parse_file(p, warn=False, fast=True)
    assert len(reads) == 2  # Arrow read it, the table build gave up, the Python parser read it again
    _same(fast, parse_file(p, warn=False, fast=False))
    assert len(fast["fused_ops"]) == 2 and len(fast["tensor_ops"]) == 4


def test_async_pairing_counts_repeats_per_tensor(tmp_path):
    """Many steps of the same tensor names: the k-th begin pairs with the k-th end (fast == slow)."""
    p = tracegen.write_run(tmp_path, size=2, steps=12, late_rank=1)[0]
    fast, slow = parse_file(p, warn=False, fast=True), parse_file(p, warn=False, fast=False)
    _same(fast, slow)
    ops = fast["tensor_ops"]
    assert ops.groupby("tensor")["occurrence"].max().eq(11).all()
    assert ops["done_ns"].notna().all() and (ops["done_ns"] >= ops["submit_ns"]).all()


def test_plain_async_ids_and_missing_rank(tmp_path):
    """Async events with a plain "id" (no id2) and metadata without the rank: Arrow reads the extra
    fields it skips for the tracer's own files, and the tables match the Python parser's."""
    p = tracegen.write_run(tmp_path, size=2, steps=2, fmt=2)[1]
    head, rest = p.read_text().split("\n", 1)
    rest = re.sub(r'"id2": \{"local": ("[^"]*")\}', r'"id": \1', rest)
    assert '"id2"' not in rest
    p.write_text(head.replace('"rank": 1, ', "") + "\n" + rest)
    fast = parse_file(p, warn=False, fast=True)
    _same(fast, parse_file(p, warn=False, fast=False))
    assert fast["rank_info"]["rank"] == 1 and len(fast["tensor_ops"]) == 4
    assert fast["tensor_ops"]["done_ns"].notna().all()


def test_shutdown_record_read_from_its_line(tmp_path):
    """The clock offset comes from the SHUTDOWN record when the metadata lacks it, also when a later
    line mentions the record's name in its arguments."""
    p = tracegen.write_run(tmp_path, size=2, steps=2, offsets={1: 7000})[1]
    head, rest = p.read_text().split("\n", 1)
    decoy = json.dumps({"ph": "i", "name": "note", "cat": "meta", "pid": 1, "tid": 1, "ts": 1e9, "s": "t",
                        "args": {"tensor": "ringscope.shutdown"}})
    rest = rest.replace("\n]}\n", ",\n" + decoy + "\n]}\n")
    p.write_text(head.replace('"clock_offset_ns": 7000, ', "") + "\n" + rest)
    fast = parse_file(p, warn=False, fast=True)
    _same(fast, parse_file(p, warn=False, fast=False))
    assert fast["rank_info"]["clock_offset_ns"] == 7000 and fast["rank_info"]["events_dropped"] == 0
    assert not fast["rank_info"]["truncated"]
