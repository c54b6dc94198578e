"""`ringscope demo`: the training subprocess, the per-rank traces, the summary, the hang scenario."""
import subprocess
import sys
import time

import pytest

from tests.mpi_util import ROOT, mpi_env


def _demo(args, timeout=240):
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "viewer.cli", "demo", *args], cwd=ROOT,
                          env=mpi_env(), capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - t0


def test_demo_hang_ends_with_the_stall_error(tmp_path):
    out = tmp_path / "hang"
    proc, seconds = _demo(["--ranks", "2", "--scenario", "hang", "--steps", "6", "--out",
                           str(out), "--no-view"], timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "stall" in (proc.stdout + proc.stderr).lower()
    assert "allreduce.loss" in proc.stderr               # the skipped tensor is named
    assert len(list(out.glob("rank-*.json"))) == 2
    rank0 = (out / "rank-00000.json").read_text()
    assert '"name":"STALL"' in rank0 and "allreduce.loss" in rank0   # the coordinator recorded it
    assert seconds < 90


def test_demo_module_keeps_runtime_imports_out():
    code = ("import sys, viewer.cli.demo; bad = [m for m in sys.modules if m.split('.')[0] in "
            "('collectives', 'torch', 'mpi4py')]; print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_demo_bad_arguments(tmp_path, capsys):
    from viewer.cli import demo
    with pytest.raises(SystemExit) as exc:
        demo.main(["--ranks", "0"])
    assert exc.value.code == 2
    afile = tmp_path / "file"
    afile.write_text("x")
    assert demo.main(["--out", str(afile), "--no-view"]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_demo_command_line_per_scenario(tmp_path):
    from viewer.cli import demo
    ns = demo.parse(["--scenario", "tiny-tensors", "--ranks", "3", "--out", str(tmp_path)])
    cmd, env = demo.train_command(ns, tmp_path)
    assert cmd[1:6] == ["-m", "collectives.launcher", "-np", "3", "--timeline"]
    assert cmd[6].endswith("/") and "--fusion-threshold-mb" in cmd
    assert cmd[cmd.index("--steps") + 1] == str(demo.DEFAULT_STEPS["tiny-tensors"])
    ns = demo.parse(["--scenario", "hang"])
    _, env = demo.train_command(ns, tmp_path)
    assert float(env["RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS"]) > 0


def _phase_medians(run_dir):
    """{rank: {phase: median ms over the steps >= 0}} from the demo's traces."""
    import json
    import statistics

    from tracer import vocab as v
    out = {}
    for r in range(4):
        evs = json.loads((run_dir / f"rank-{r:05d}.json").read_text())["traceEvents"]
        durs: dict = {}
        for e in evs:
            if e["ph"] == "X" and e.get("cat") == v.CAT_PHASE and e["args"]["step"] >= 0:
                durs.setdefault(e["name"], []).append(e["dur"] / 1000)
        out[r] = {k: statistics.median(d) for k, d in durs.items()}
    return out


def _busy_processes():
    from pathlib import Path
    found = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and b"parent = os.getppid()" in (p / "cmdline").read_bytes():
                found.append(int(p.name))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("scenario", ["slow-data", "cpu-contention"])
def test_scenario_plants_its_cause_in_rank_2s_phases(tmp_path, scenario):
    """A real 4-rank run, the demo's whole path (traces, then the summary): slow-data makes rank 2's
    batch waits ~40 ms longer, cpu-contention its forward and backward slower (its core shared with busy
    processes, which are gone after)."""
    from tracer import vocab as v
    out = tmp_path / scenario
    proc, _ = _demo(["--ranks", "4", "--scenario", scenario, "--steps", "6", "--out", str(out),
                     "--no-view"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(p.name for p in out.glob("rank-*.json")) == [f"rank-{r:05d}.json" for r in range(4)]
    assert "gradient tensors" in proc.stdout            # the training ran (rank 0's banner)
    assert "summarize --full" in proc.stdout            # the summary printed
    med = _phase_medians(out)
    assert all({v.DATA_WAIT, v.FORWARD, v.BACKWARD, v.OPTIMIZER_STEP} <= set(m) for m in med.values()), med
    others = [med[r] for r in (0, 1, 3)]
    if scenario == "slow-data":
        assert med[2][v.DATA_WAIT] >= 35 and max(m[v.DATA_WAIT] for m in others) < 10, med
    else:
        def compute(m):
            return m[v.FORWARD] + m[v.BACKWARD]
        assert compute(med[2]) > 1.5 * max(compute(m) for m in others), med
        assert _busy_processes() == []


def test_new_scenarios_on_the_command_line(tmp_path):
    from viewer.cli import demo
    for scenario in ("slow-data", "cpu-contention"):
        ns = demo.parse(["--scenario", scenario, "--out", str(tmp_path)])
        cmd, _ = demo.train_command(ns, tmp_path)
        assert cmd[cmd.index("--scenario") + 1] == scenario
        assert cmd[cmd.index("--steps") + 1] == str(demo.DEFAULT_STEPS[scenario])


def test_ddp_demo_runs_torchrun_with_the_timeline_set(tmp_path, capsys):
    from viewer.cli import demo
    ns = demo.parse(["--ddp", "--scenario", "straggler", "--ranks", "4", "--out", str(tmp_path)])
    cmd, env = demo.train_command(ns, tmp_path)
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"]
    assert cmd[5] == str(demo.DDP_SCRIPT) and cmd[cmd.index("--scenario") + 1] == "straggler"
    assert env["RINGSCOPE_TIMELINE"].endswith("/") and str(demo.ROOT) in env["PYTHONPATH"]
    for args in (["--ddp", "--scenario", "hang"], ["--scenario", "small-buckets"]):   # each needs the other
        with pytest.raises(SystemExit):
            demo.parse(args)
    assert "--ddp" in capsys.readouterr().err
