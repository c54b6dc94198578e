"""The launcher: options become the environment, horovodrun's command lines run, and a failing
rank fails the whole run fast."""
import ast
import os
import re
import subprocess
import sys
import time

import pytest

from collectives import launcher
from tests.mpi_util import ROOT, SCRIPTS, mpi_env


def _launch(args, timeout=90):
    return subprocess.run([sys.executable, "-m", "collectives.launcher", *map(str, args)],
                          cwd=ROOT, env=mpi_env(), capture_output=True, text=True,
                          timeout=timeout)


def test_options_set_environment():
    ns = launcher.parse(["-np", "3", "-H", "a:2,b:1", "--timeline", "t.json",
                         "--fusion-threshold-mb", "2", "--cycle-time-ms", "0.5", "--mark-cycles",
                         str(SCRIPTS / "runtime_init_only.py"), "--lr", "3"])
    cmd, env = launcher.build(ns, {})
    assert cmd[1:3] == ["-n", "3"] and cmd[3:5] == ["-hosts", "a:2,b:1"]
    assert cmd[-4:] == [sys.executable, str(SCRIPTS / "runtime_init_only.py"), "--lr", "3"]
    assert cmd[0].endswith("mpiexec")
    assert env["RINGSCOPE_FUSION_THRESHOLD"] == str(2 * 1024 * 1024)
    assert env["RINGSCOPE_CYCLE_TIME"] == "0.5" and env["RINGSCOPE_TIMELINE_MARK_CYCLES"] == "1"
    assert env["RINGSCOPE_TIMELINE"].endswith("t.json") and str(ROOT) in env["PYTHONPATH"]
    assert "RINGSCOPE_HIERARCHICAL_ALLREDUCE" not in env
    _, env = launcher.build(launcher.parse(["-np", "2", "--hierarchical-allreduce",
                                            str(SCRIPTS / "runtime_init_only.py")]), {})
    assert env["RINGSCOPE_HIERARCHICAL_ALLREDUCE"] == "1"


def test_timeline_directory_keeps_its_trailing_slash():
    cmd, env = launcher.build(launcher.parse(["-np", "2", "--timeline", "runs/new/", "-m", "x"]), {})
    assert env["RINGSCOPE_TIMELINE"].endswith("/runs/new/")


@pytest.mark.parametrize("words, want", [
    (["python", "{script}", "-np", "5"], [sys.executable, "{script}", "-np", "5"]),
    (["python3.11", "{script}"], [sys.executable, "{script}"]),
    (["-m", "pkg.mod", "--lr", "3"], [sys.executable, "-m", "pkg.mod", "--lr", "3"]),
    (["python", "-m", "pkg.mod"], [sys.executable, "-m", "pkg.mod"]),
    (["{script}", "--lr", "3"], [sys.executable, "{script}", "--lr", "3"]),
    ([sys.executable, "{script}"], [sys.executable, "{script}"]),
    (["true", "x"], ["true", "x"]),
])
def test_command_line_forms(words, want):
    script = str(SCRIPTS / "runtime_init_only.py")
    words = [w.format(script=script) for w in words]
    ns = launcher.parse(["-np", "2", "--cycle-time-ms", "1", *words])
    assert ns.command == words
    assert launcher.command_line(ns.command) == [w.format(script=script) for w in want]


@pytest.mark.parametrize("words, named", [
    (["python", "no/such.py"], "no/such.py"), (["no/such.py"], "no/such.py"),
    (["no-such-command-xyz"], "no-such-command-xyz"), (["-m"], "module name"),
])
def test_command_that_cannot_run_is_one_line_error(words, named):
    with pytest.raises(launcher.CommandError, match=named):
        launcher.command_line(words)
    proc = _launch(["-np", "2", *words])
    assert proc.returncode == 2 and named in proc.stderr and "Traceback" not in proc.stderr


def _executable_script(tmp_path):
    """A script with a shebang naming this interpreter, run as an executable."""
    path = tmp_path / "train"
    path.write_text(f"#!{sys.executable}\n" + (SCRIPTS / "runtime_init_only.py").read_text())
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("form", ["python", "python3", "interpreter path", "-m", "executable"])
def test_horovodrun_command_lines_run(form, tmp_path):
    """``ringscope run -np 2 python train.py --flag v`` and friends, on real mpiexec."""
    script = SCRIPTS / "runtime_init_only.py"
    words = {"python": ["python", script], "python3": ["python3", script],
             "interpreter path": [sys.executable, script],
             "-m": ["-m", "tests.mpi_scripts.runtime_init_only"],
             "executable": [_executable_script(tmp_path)]}[form]
    proc = _launch(["-np", "2", *words, "--flag", "v"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for r in (0, 1):
        assert f"OK rank={r} size=2" in proc.stdout, proc.stdout
    assert proc.stdout.count("args=['--flag', 'v']") == 2, proc.stdout


def test_runs_script_with_settings():
    proc = _launch(["-np", "2", "--fusion-threshold-mb", "1", "--cycle-time-ms", "0.25", "--bind-to", "core",
                    SCRIPTS / "runtime_init_only.py", "--flag", "v"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for r in (0, 1):
        assert f"OK rank={r} size=2 local={r}/2 cross=0/1 threshold=1048576 cycle=0.25" \
               in proc.stdout, proc.stdout
    assert "args=['--flag', 'v']" in proc.stdout
    # bound: one core each, and not the same one where the host has two
    cores = [ast.literal_eval(c) for c in re.findall(r"cores=(\[[\d, ]*\])", proc.stdout)]
    assert [len(c) for c in cores] == [1, 1], proc.stdout
    assert len(os.sched_getaffinity(0)) < 2 or cores[0] != cores[1], proc.stdout


def test_failing_rank_fails_run_with_its_error():
    t0 = time.monotonic()
    proc = _launch(["-np", "3", SCRIPTS / "runtime_fail.py"], timeout=60)
    took = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "boom from rank 1" in out and "UNREACHABLE" not in out, out
    assert took < 30, f"took {took:.1f}s"


def test_missing_script_is_one_line_error():
    proc = _launch(["-np", "2", "no/such/script.py"])
    assert proc.returncode == 2 and "no/such/script.py" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("mode", ["plain", "cached", "join"])
def test_rank_shutting_down_early_fails_waiting_ranks(mode):
    proc = _launch(["-np", "3", SCRIPTS / "runtime_early_exit.py"] + ([mode] if mode != "plain" else []),
                   timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for r in (0, 2):
        assert f"rank {r} error after" in out, out
    name = "__join__" if mode == "join" else "orphan"
    assert f"{name!r} can never complete: rank 1 shut down without submitting it" in out, out
