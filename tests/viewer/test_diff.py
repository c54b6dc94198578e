"""``ringscope diff`` on real runs: the shipped sample traces, runs the real recorder writes with seeded noise
(phase_runs), the shared Kineto trace against a copy with one kernel family slowed, and Horovod timelines."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.viewer.conftest import ROOT, SAMPLES, horovod_file
from tests.viewer.kineto_edit import slow_family
from tests.viewer.phase_runs import write_run
from viewer.cli import diff as cli
from viewer.diff.compare import diff_runs
from viewer.run import Run

KINETO = ROOT.parent / "shared" / "kineto_traces" / "nccl_2rank" / "rank-0.json.gz"
FAMILY = "cudnn::bn_bw"   # a kernel family of that trace (batch norm's backward)


def _load(path):
    return Run.load(path, cache=False)


@pytest.fixture(scope="module")
def healthy():
    return _load(SAMPLES / "healthy")


def _phases_sum_to_change(d):
    """The measured phases (other as measured, not the remainder) add up to the step change within 5 %."""
    measured = sum(p["b_ms"] - p["a_ms"] for p in d["phases"])
    assert abs(measured - d["change_ms"]) <= 0.05 * abs(d["change_ms"]), (measured, d["change_ms"])
    assert abs(sum(p["delta_ms"] for p in d["phases"]) - d["change_ms"]) < 1e-6


def test_slow_loader_on_one_rank_is_data_wait_there_and_a_new_straggler(healthy):
    d = diff_runs(healthy, _load(SAMPLES / "slow-data"))
    assert d["significant"] and d["change_pct"] > 10
    _phases_sum_to_change(d)
    assert d["ranks"]["new"] == [2]
    top = d["ranks"]["movers"][0]
    assert (top["rank"], top["phase"]) == (2, "data wait") and top["delta_ms"] > 30   # 40 ms planted
    assert "rank 2 is a new straggler (its data wait" in d["verdict"]
    assert d["settings_changed"] == [] and d["cautions"] == []   # the same machine, as quiet


def test_a_busier_machine_is_a_caution_beside_the_verdict(healthy):
    d = diff_runs(healthy, _load(SAMPLES / "cpu-contention"))   # 5 spinning processes share rank 2's core
    assert d["significant"] and d["ranks"]["new"] == [2]
    env = d["environment"]
    assert env["b"]["others_load"] - env["a"]["others_load"] >= 1   # the spinning processes, beside the ranks
    assert len(d["cautions"]) == 1 and "other processes' load beside the ranks'" in d["cautions"][0]


def test_the_same_run_twice_is_no_change(healthy):
    d = diff_runs(healthy, healthy)
    assert d["change_ms"] == 0 and not d["significant"]
    assert all(p["delta_ms"] == 0 for p in d["phases"]) and all(m["delta_ms"] == 0 for m in d["movers"])
    assert "no change beyond the noise" in d["verdict"]


def test_reruns_with_the_same_settings_show_no_change_beyond_noise(tmp_path):
    runs = [_load(write_run(tmp_path / f"seed{s}", size=2, steps=8, seed=s)) for s in range(11)]
    calls = [diff_runs(runs[0], r)["significant"] for r in runs[1:]]
    assert calls.count(False) >= 9, calls


def test_a_planted_30ms_loader_is_named_in_reruns_of_the_recorder(tmp_path):
    a = _load(write_run(tmp_path / "a", size=4, steps=12, seed=1))
    b = _load(write_run(tmp_path / "b", size=4, steps=12, seed=2, slow={2: {"data_wait": 30.0}}))
    d = diff_runs(a, b)
    assert d["significant"] and d["change_ci_pct"][0] > 0
    _phases_sum_to_change(d)
    assert d["ranks"]["new"] == [2]
    assert (d["ranks"]["movers"][0]["rank"], d["ranks"]["movers"][0]["phase"]) == (2, "data wait")
    assert abs(d["ranks"]["movers"][0]["delta_ms"] - 30) < 5


def test_a_slower_host_is_named(tmp_path):
    hosts = ["h0", "h0", "h1", "h1"]
    a = _load(write_run(tmp_path / "a", size=4, steps=8, seed=3, hosts=hosts))
    b = _load(write_run(tmp_path / "b", size=4, steps=8, seed=4, hosts=hosts,
                        slow={2: {"forward": 8.0}, 3: {"forward": 8.0}}))
    d = diff_runs(a, b)
    assert d["significant"]
    _phases_sum_to_change(d)
    top, other = d["ranks"]["hosts"]
    assert (top["host"], top["ranks"]) == ("h1", [2, 3]) and abs(top["delta_ms"] - 8) < 2 and abs(other["delta_ms"]) < 2
    assert "host h1 got slower" in d["verdict"]


def test_fusion_threshold_change_is_named_and_the_collective_count_rises(healthy):
    d = diff_runs(healthy, _load(SAMPLES / "tiny-tensors"))
    assert {"name": "fusion_threshold", "a": 128 << 20, "b": 64 << 10} in d["settings_changed"]
    ar = next(c for c in d["collectives"] if c["op"] == "ALLREDUCE")
    assert ar["b_count"] > 2 * ar["a_count"]
    assert ar["b_fill"] > 10 * ar["a_fill"]   # a 64 KiB buffer is filled, a 128 MiB one is not
    assert "forward" in d["phases_unknown"]   # tiny-tensors predates the phase spans: folded into other


def test_slow_cross_host_link_is_communication_and_coincides_with_the_hosts(healthy):
    d = diff_runs(healthy, _load(SAMPLES / "two-hosts-slow-link"))
    assert d["significant"] and d["change_pct"] > 100
    _phases_sum_to_change(d)
    comm = sum(p["delta_ms"] for p in d["phases"] if p["phase"] in ("negotiation", "exposed comm"))
    assert comm > 0.9 * d["change_ms"]
    assert {"name": "hosts", "a": 1, "b": 2} in d["settings_changed"]
    assert d["coincides"] and "hosts 1 → 2" in d["coincides"][0]
    assert d["links"]["a"] is None and d["links"]["b"]["hosts"] == ["h0", "h1"]
    assert d["links"]["b"]["waited_ms"] > 0.8 * d["change_ms"] and d["links"]["b"]["busbw_gbps"] < 0.05  # 200 Mbit/s
    assert "the cross-host link (h0–h1) carries it" in d["verdict"]


def test_kineto_kernel_family_slowed_20_pct_is_named(tmp_path):
    if not KINETO.exists():
        pytest.skip(f"real Kineto traces not present at {KINETO.parent.parent} (../shared is absent)")
    b_file = tmp_path / "b" / "rank-0.json"   # uncompressed: no gzip time in the test
    assert slow_family(KINETO, b_file, FAMILY) > 0
    d = diff_runs(_load(KINETO), _load(b_file))
    kernels = [m for m in d["movers"] if m["kind"] == "kernel"]
    assert kernels and FAMILY in d["movers"][0]["name"]
    for m in kernels:
        if m["delta_ms"] > 0:
            assert FAMILY in m["name"] and abs(m["delta_pct"] - 20) < 0.5
    assert d["settings_changed"] == [] and len(d["phases"]) == 2   # exposed comm and other, from the GPU


def test_kineto_runs_of_other_jobs_match_collectives_by_position_and_size():
    pair = KINETO.parent.parent / "pair_128rank_job"
    if not pair.exists():
        pytest.skip(f"real Kineto traces not present at {pair.parent} (../shared is absent)")
    d = diff_runs(_load(KINETO), _load(pair))
    assert {"name": "ranks", "a": 2, "b": 128} in d["settings_changed"]
    assert {m["matched_by"] for m in d["movers"] if m["kind"] == "tensor"} == {"position and size"}
    assert not d["testable"] and "too few steps (3 and 2)" in d["verdict"]


def test_horovod_timelines_compare_collectives_and_name_the_backend():
    d = diff_runs(_load(horovod_file("gloo_2ranks")), _load(horovod_file("mpi_2ranks")))
    assert d["change_ms"] is None and "mark no steps" in d["verdict"]
    assert {"name": "backend", "a": "gloo", "b": "mpi"} in d["settings_changed"]
    assert d["collectives"][0]["op"] == "ALLREDUCE" and d["movers"][0]["matched_by"] == "name"


def test_cli_json_csv_and_fail_if_slower(tmp_path, capsys):
    a, b = str(SAMPLES / "healthy"), str(SAMPLES / "slow-data")
    assert cli.main([a, b, "--json", "--csv", str(tmp_path / "csv"), "--fail-if-slower", "5"]) == cli.EXIT_SLOWER
    out = capsys.readouterr()
    d = json.loads(out.out)
    for key in ("change_pct", "significant", "settings_changed", "phases", "movers"):
        assert key in d
    assert d["a"]["step_ms"] < d["b"]["step_ms"]
    assert "slower than A by more than 5 %" in out.err
    assert {p.name for p in (tmp_path / "csv").iterdir()} >= {"headline.csv", "phases.csv", "movers.csv"}
    assert cli.main([a, b, "--fail-if-slower", "90"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("B's step is") and "Where the change went, per step" in "\n".join(text)


def test_cli_bad_input_is_one_line_naming_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"not json at all")
    for args in ([str(bad), str(SAMPLES / "healthy")], [str(SAMPLES / "healthy"), str(tmp_path / "missing")]):
        p = subprocess.run([sys.executable, "-m", "viewer.cli", "diff", *args], cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 2 and "Traceback" not in p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and (str(bad) in lines[0] or "missing" in lines[0]), p.stderr
