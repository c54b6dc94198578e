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
    from tests.dashboard.conftest import free_port

    r = run_view(str(bad), "--port", str(free_port()))
    assert r.returncode == 2
    assert "rank0.json" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_missing_run_and_bad_root(tmp_path):
    r = run_view(str(tmp_path / "nope"))
    assert r.returncode == 2 and "nope" in r.stderr and "Traceback" not in r.stderr
    r = run_view("--root", str(tmp_path / "nothere"))
    assert r.returncode == 2 and "nothere" in r.stderr


def test_port_in_use_is_one_line_exit_2():
    import socket

    from tests.dashboard.conftest import SAMPLES

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_view(str(SAMPLES / "healthy"), "--port", str(port))
    assert r.returncode == 2 and f"127.0.0.1:{port}" in r.stderr
    assert "in use" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_bad_nsys_export_is_one_line_exit_2(tmp_path):
    from tests.dashboard.conftest import SAMPLES, free_port

    bad = tmp_path / "report.sqlite"
    bad.write_bytes(b"not a database")
    r = run_view(str(SAMPLES / "healthy"), "--nsys", str(bad), "--port", str(free_port()))
    assert r.returncode == 2 and "report.sqlite" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_limits_must_be_positive(tmp_path):
    from tests.dashboard.conftest import SAMPLES

    for opt in ("--max-expanded-mb", "--max-runs", "--max-memory-mb"):
        r = run_view(str(SAMPLES / "healthy"), opt, "0")
        assert r.returncode == 2 and f"{opt} must be > 0" in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
