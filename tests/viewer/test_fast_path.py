"""The Arrow fast path and the per-event Python parser give identical tables (real and cut traces)."""
from __future__ import annotations

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
