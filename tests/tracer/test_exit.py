"""The file survives the ways a process ends: SIGKILL (≤ ~1 s lost), SIGTERM, SIGINT, chained handlers."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from tests.mpi_util import SCRIPTS, mpi_env
from tests.tracer.readback import read_trace
from tracer import clock
from tracer import vocab as v

SCRIPT = SCRIPTS / "tracer_emit_loop.py"


def _start(tmp_path, *args, **env):
    e = mpi_env({"RINGSCOPE_TIMELINE": str(tmp_path) + "/", **env})
    for k in ("HOROVOD_TIMELINE", "RINGSCOPE_TIMELINE_STEPS", "RINGSCOPE_TIMELINE_MAX_MB"):
        e.pop(k, None)
    p = subprocess.Popen([sys.executable, str(SCRIPT), *args], env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    line = p.stdout.readline()
    assert line.strip() == "ready", line + p.stdout.read()
    return p


def _finish(p, sig):
    p.send_signal(sig)
    try:
        out, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    return p.returncode, out


def test_sigkill_loses_at_most_about_a_second(tmp_path):
    p = _start(tmp_path, "--ready-after", "2.5")
    killed_at = clock.wall_ns()
    rc, _ = _finish(p, signal.SIGKILL)
    assert rc == -signal.SIGKILL
    data = read_trace(tmp_path / "rank-00000.json")       # loads (repairing if cut mid-write)
    submits = [e for e in data.events if e.get("name") == v.SUBMIT]
    assert len(submits) > 100
    last = max(e["args"]["wall_ns"] for e in submits)
    lost_s = (killed_at - last) / 1e9
    assert lost_s < 1.25, f"last event on disk was {lost_s:.2f}s before the kill"
    # no event on disk is cut in half: every one is a whole event
    assert all(e["ph"] == "M" or ("ts" in e and "pid" in e) for e in data.events)


def test_sigterm_finishes_the_file(tmp_path):
    p = _start(tmp_path)
    rc, out = _finish(p, signal.SIGTERM)
    assert rc == -signal.SIGTERM, out
    doc = json.loads((tmp_path / "rank-00000.json").read_text())
    assert doc["traceEvents"][-1]["name"] == v.SHUTDOWN


def test_sigint_flushes_and_atexit_finishes(tmp_path):
    p = _start(tmp_path)
    rc, out = _finish(p, signal.SIGINT)
    assert rc != 0 and "KeyboardInterrupt" in out
    doc = json.loads((tmp_path / "rank-00000.json").read_text())
    assert doc["traceEvents"][-1]["name"] == v.SHUTDOWN


def test_previous_sigterm_handler_still_runs(tmp_path):
    marker = tmp_path / "marker"
    p = _start(tmp_path / "t", "--own-sigterm", str(marker))
    rc, out = _finish(p, signal.SIGTERM)
    assert rc == 3 and marker.read_text() == "called", out
    doc = json.loads((tmp_path / "t" / "rank-00000.json").read_text())
    assert doc["traceEvents"][-1]["name"] == v.SHUTDOWN


def test_normal_exit_without_close_is_finished_by_atexit(tmp_path):
    code = ("import tracer; from tracer import vocab as v; r = tracer.configure({'rank': 0});"
            "r.instant(v.TID_FRAMEWORK, v.SUBMIT, v.CAT_FRAMEWORK)")
    e = mpi_env({"RINGSCOPE_TIMELINE": str(tmp_path) + "/"})
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", code], env=e, check=True, timeout=30)
    assert time.monotonic() - t0 < 10
    names = [e["name"] for e in json.loads((tmp_path / "rank-00000.json").read_text())["traceEvents"]]
    assert names[-2:] == [v.SUBMIT, v.SHUTDOWN]


def test_forked_child_does_not_record(env, tmp_path):
    import os

    import tracer
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0})
    pid = os.fork()
    if pid == 0:   # child: recording must be a no-op, exit without running atexit
        child = tracer.get_recorder()
        ok = (not child.enabled) and child is not rec
        child.instant(v.TID_FRAMEWORK, "CHILD", v.CAT_FRAMEWORK)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    rec.instant(v.TID_FRAMEWORK, "PARENT", v.CAT_FRAMEWORK)
    tracer.close()
    names = [e["name"] for e in json.loads(rec.path.read_text())["traceEvents"]]
    assert "PARENT" in names and "CHILD" not in names
