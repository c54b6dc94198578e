"""``ringscope diff`` with several runs a side: reruns that differ from run to run (as real reruns on a shared
machine do) are no change three a side, though one run a side calls them one; a planted slow loader still is.
Runs written by the real recorder with seeded noise (phase_runs); a run's own offset is its rerun noise."""
from __future__ import annotations

import json

import pytest

from tests.viewer.conftest import SAMPLES
from tests.viewer.phase_runs import write_run
from viewer.cli import diff as cli
from viewer.cli.diff_text import lines
from viewer.diff.compare import diff_runs, diff_sides
from viewer.run import Run

OFFSETS_MS = (0.0, 3.0, 6.0, 1.0, 5.0, 2.0)   # each rerun's own slowness: the spread between reruns


def _write(root, name, offset, seed, loader_ms=0.0):
    slow = {r: {"forward": offset} for r in range(2)}
    slow[1]["data_wait"] = loader_ms
    return write_run(root / name, size=2, steps=8, seed=seed, slow=slow)


@pytest.fixture(scope="module")
def reruns(tmp_path_factory):
    root = tmp_path_factory.mktemp("reruns")
    same = [_write(root, f"a{i}", off, seed=i) for i, off in enumerate(OFFSETS_MS)]
    slower = [_write(root, f"b{i}", off, seed=10 + i, loader_ms=30.0) for i, off in enumerate(OFFSETS_MS[:3])]
    return same, slower


@pytest.fixture(scope="module")
def loaded(reruns):
    return [[Run.load(p, cache=False) for p in side] for side in reruns]


def test_rerun_spread_is_no_change_three_a_side_though_one_a_side_calls_it(loaded):
    runs = loaded[0]
    assert diff_runs(runs[0], runs[2])["significant"]   # 6 ms apart, steps tight: one run a side cannot tell
    d = diff_sides(runs[:3], runs[3:])
    assert not d["significant"] and d["testable"] and d["runs"] == [3, 3]
    assert d["p_value"] > 0.5 and d["change_ci_pct"][0] < 0 < d["change_ci_pct"][1]
    assert "no change beyond the noise" in d["verdict"]
    assert "Welch's t-test on the log of the runs' means" in d["compared"]
    assert [r["source"] for r in d["a"]["runs"]] == ["A1", "A2", "A3"]
    assert abs(d["a"]["step_ms"] - sum(r["step_ms"] for r in d["a"]["runs"]) / 3) < 1e-9


def test_a_planted_30ms_loader_is_called_three_a_side(loaded):
    a, b = loaded[0][:3], loaded[1]
    d = diff_sides(a, b)
    assert d["significant"] and d["change_ci_pct"][0] > 30   # ~+30 ms on a ~40 ms step
    assert "beyond the noise between reruns" in d["verdict"]
    measured = sum(p["b_ms"] - p["a_ms"] for p in d["phases"])   # the runs' mean phases carry the change
    assert abs(measured - d["change_ms"]) <= 0.05 * abs(d["change_ms"])
    assert d["ranks"]["new"] == [1] and (d["ranks"]["movers"][0]["rank"], d["ranks"]["movers"][0]["phase"]) == \
        (1, "data wait")


def test_cli_takes_runs_a_side_and_fails_if_slower_on_their_spread(reruns, capsys):
    same, slower = (list(map(str, x)) for x in reruns)
    argv = ["--a", *same[:3], "--b", *slower, "--json", "--fail-if-slower", "40", "--no-cache"]
    assert cli.main(argv) == cli.EXIT_SLOWER
    out = capsys.readouterr()
    d = json.loads(out.out)
    assert "slower than A by more than 40 %" in out.err
    assert d["runs"] == [3, 3] and [r["source"] for r in d["b"]["runs"]] == slower
    assert d["a"]["source"] in same[:3]   # the median run, which the collectives and ranks come from
    assert "  A: 3 runs, their mean step" in "\n".join(lines(d))
    assert cli.main([same[0], slower[0], "--json", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == [1, 1]   # A B: one run a side, as before


@pytest.mark.parametrize("argv", [["x", "y", "--a", "z"], ["x"], ["x", "y", "z"], ["--a", "x"], []])
def test_cli_wrong_sides_are_one_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2 and capsys.readouterr().err.strip().splitlines()[-1].startswith("ringscope diff: error")


def test_a_bad_run_among_several_is_one_line(reruns, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"not json at all")
    assert cli.main(["--a", *map(str, reruns[0][:2]), "--b", str(reruns[0][2]), str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0]


def test_runs_of_one_side_with_different_settings_are_a_caution():
    healthy, tiny = Run.load(SAMPLES / "healthy", cache=False), Run.load(SAMPLES / "tiny-tensors", cache=False)
    d = diff_sides([healthy, tiny], [healthy], ["h", "t"], ["h"])
    assert any(c.startswith("A's runs differ in") and "fusion_threshold (t)" in c for c in d["cautions"])


def test_one_run_against_several_pools_their_spread_and_one_against_one_is_diff_runs(loaded):
    same, slower = loaded
    d = diff_sides(same[:3], slower[:1])
    assert d["testable"] and d["significant"] and "Student's t-test (pooled" in d["compared"]
    assert diff_sides(same[:1], slower[:1]) == diff_runs(same[0], slower[0])
