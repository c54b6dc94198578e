"""``ringscope view`` on bad input: one line naming the file, exit 2, no traceback."""
import subprocess
import sys

from tests.dashboard.conftest import REPO


def run_view(*args):
    return subprocess.run([sys.executable, "-m", "viewer.cli", "view", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_not_json_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "rank0.json"
    bad.write_bytes(b"\x00\x01 garbage")
    r = run_view(str(bad), "--port", "1")
    assert r.returncode == 2
    assert "rank0.json" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_missing_run_and_bad_root(tmp_path):
    r = run_view(str(tmp_path / "nope"))
    assert r.returncode == 2 and "nope" in r.stderr and "Traceback" not in r.stderr
    r = run_view("--root", str(tmp_path / "nothere"))
    assert r.returncode == 2 and "nothere" in r.stderr
