"""`ringscope cluster up|hosts|down` and `ringscope run --cluster` on real namespaced hosts."""
import json
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from collectives import cluster, launcher
from tests.cluster.conftest import assert_all_gone, namespace_inodes, processes_in, skip_unless_possible
from tests.mpi_util import ROOT, mpi_env

WORKER = ROOT / "tests" / "cluster" / "cluster_worker.py"


def _ringscope(*args, timeout=60, unprivileged=False):
    cmd = [sys.executable, "-m", "viewer.cli", *map(str, args)]
    if unprivileged:   # a user namespace of its own: not root there, yet it still reads this checkout
        cmd = ["unshare", "--user", *cmd]
    return subprocess.run(cmd, cwd=ROOT, env=mpi_env(), capture_output=True, text=True, timeout=timeout)


def test_up_hosts_down_are_idempotent_and_leave_nothing():
    skip_unless_possible()
    inodes: set[int] = set()
    try:
        first = _ringscope("cluster", "up", "--hosts", "3", "--slots", "2", "--rate", "1gbit")
        assert first.returncode == 0, first.stderr
        assert first.stdout.split() == ["h0:2", "h1:2", "h2:2"]
        inodes = namespace_inodes()
        assert len(inodes) == 3
        again = _ringscope("cluster", "up", "--hosts", "3", "--slots", "2", "--rate", "1gbit")
        assert again.returncode == 0 and namespace_inodes() == inodes   # the same hosts, not new ones
        other = _ringscope("cluster", "up", "--hosts", "2", "--slots", "1")
        assert other.returncode == 2 and "cluster down" in other.stderr
        assert len(other.stderr.strip().splitlines()) == 1
        hosts = _ringscope("cluster", "hosts")
        assert hosts.returncode == 0 and hosts.stdout.split() == ["h0:2", "h1:2", "h2:2"]
        qdiscs = subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True).stdout
        assert sum("tbf" in q and "rscope-h" in q and "1Gbit" in q for q in qdiscs.splitlines()) == 3
        inside = subprocess.run([str(cluster.LAUNCHER), "-x", "h2", "hostname;", "cat", "/etc/hosts"],
                                capture_output=True, text=True, timeout=30)
        assert inside.stdout.splitlines()[0] == "h2" and "10.213.0.11\th1" in inside.stdout
    finally:
        down = _ringscope("cluster", "down")
        assert down.returncode == 0, down.stderr
        assert_all_gone(inodes)
    again = _ringscope("cluster", "down")
    assert again.returncode == 0 and "nothing to remove" in again.stderr
    none = _ringscope("cluster", "hosts")
    assert none.returncode == 1 and "no cluster is up" in none.stderr


# a TCP sink on h1, and a source on h0 that connects once the sink listens and times 10 MiB
_SINK = ("import socket; s = socket.create_server(('0.0.0.0', 5599)); c, _ = s.accept()\n"
         "while c.recv(1 << 20): pass\n"
         "c.close()")
_SOURCE = ("import socket, time\n"
           "for _ in range(200):\n"
           "    try: s = socket.create_connection(('h1', 5599)); break\n"
           "    except OSError: time.sleep(0.05)\n"
           "t = time.perf_counter(); s.sendall(bytes(10 << 20)); s.shutdown(socket.SHUT_WR); s.recv(1)\n"
           "print(time.perf_counter() - t)")


def test_rate_limits_the_link_between_hosts():
    skip_unless_possible()
    inodes: set[int] = set()
    try:
        cluster.up(2, 1, "200mbit")
        inodes = namespace_inodes()
        sink = subprocess.Popen([str(cluster.LAUNCHER), "h1", sys.executable, "-c", shlex.quote(_SINK)])
        sent = subprocess.run([str(cluster.LAUNCHER), "h0", sys.executable, "-c", shlex.quote(_SOURCE)],
                              capture_output=True, text=True, timeout=60)
        assert sent.returncode == 0, sent.stderr
        assert sink.wait(timeout=30) == 0
        mbit = (10 << 20) * 8 / 1e6 / float(sent.stdout)
        assert mbit < 200 * 1.15, f"{mbit:.0f} Mbit/s through a 200mbit link"
    finally:
        cluster.down()
        assert_all_gone(inodes)


def test_down_after_a_crash_removes_by_prefix_and_kills_what_runs_inside():
    skip_unless_possible()
    inodes: set[int] = set()
    try:
        cluster.up(1, 1)
        inodes = namespace_inodes()
        sleeper = subprocess.Popen([str(cluster.LAUNCHER), "h0", "sleep", "600"])
        deadline = time.monotonic() + 20
        while not processes_in(inodes) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_in(inodes), "the sleeper never entered h0's namespace"
        cluster.STATE.unlink()          # as if `up` had crashed before writing its state
        cluster.down()
        assert sleeper.wait(timeout=10) != 0
    finally:
        cluster.down()
        assert_all_gone(inodes)


def test_up_refuses_a_subnet_in_use():
    skip_unless_possible()
    subprocess.run(["ip", "link", "add", "rstest-sub0", "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "addr", "add", "10.213.0.99/24", "dev", "rstest-sub0"], check=True)
        subprocess.run(["ip", "link", "set", "rstest-sub0", "up"], check=True)
        proc = _ringscope("cluster", "up", "--hosts", "2", "--slots", "1")
        assert proc.returncode == 2 and "in use" in proc.stderr and "rstest-sub0" in proc.stderr
        assert cluster.leftovers() == []
    finally:
        subprocess.run(["ip", "link", "del", "rstest-sub0"])
        cluster.down()


def test_without_root_one_line_and_exit_2():
    proc = _ringscope("cluster", "up", "--hosts", "2", "--slots", "2", unprivileged=True)
    if "unshare" in proc.stderr:
        pytest.skip(f"cannot make a user namespace here: {proc.stderr.strip()[-200:]}")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "ringscope cluster: needs root (network namespaces and veth links); run it as root"


def test_root_without_net_admin_one_line_and_exit_2():
    skip_unless_possible()
    if shutil.which("capsh") is None:
        pytest.skip("needs capsh to drop CAP_NET_ADMIN")
    cmd = shlex.join([sys.executable, "-m", "viewer.cli", "cluster", "up", "--hosts", "1"])
    proc = subprocess.run(["capsh", "--drop=cap_net_admin", "--", "-c", cmd], cwd=ROOT, env=mpi_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and cluster.leftovers() == []
    assert proc.stderr.strip() == ("ringscope cluster: needs root with CAP_NET_ADMIN (network namespaces); "
                                   "this root lacks them")


def test_run_cluster_without_a_cluster_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(cluster, "STATE", tmp_path / "none.json")
    ns = launcher.parse(["-np", "2", "--cluster", str(WORKER)])
    with pytest.raises(cluster.ClusterError, match="no cluster is up"):
        launcher.build(ns, {})


def test_run_cluster_rejects_hosts_outside_it(two_hosts):
    ns = launcher.parse(["-np", "2", "-H", "h0:1,h5:1", "--cluster", str(WORKER)])
    with pytest.raises(cluster.ClusterError, match="h5 not in the cluster"):
        launcher.build(ns, {})
    cmd, env = launcher.build(launcher.parse(["-np", "4", "--cluster", str(WORKER)]), {})
    assert cmd[cmd.index("-hosts") + 1] == "h0:2,h1:2"
    assert cmd[cmd.index("-launcher-exec") + 1] == str(cluster.LAUNCHER)


def _link_bytes(link: str) -> int:
    stats = f"/sys/class/net/{link}/statistics"
    return sum(int(open(f"{stats}/{k}_bytes").read()) for k in ("rx", "tx"))


@pytest.mark.parametrize("backend", ["ring", "mpi"])
def test_two_hosts_two_ranks_each_allreduce(two_hosts, tmp_path, backend):
    results, trace = tmp_path / "results", tmp_path / "trace"
    results.mkdir()
    before = {h["netns"]: _link_bytes(h["netns"]) for h in two_hosts["hosts"]}
    env = mpi_env({"RESULTS_DIR": results})
    proc = subprocess.run([sys.executable, "-m", "viewer.cli", "run", "-np", "4", "-H", "h0:2,h1:2",
                           "--cluster", "--backend", backend, "--timeline", f"{trace}/", str(WORKER)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = {r: json.loads((results / f"rank-{r}.json").read_text()) for r in range(4)}
    for r, got in ranks.items():
        assert got["errors"] == [], (r, got["errors"])
        assert got["host"] == f"h{r // 2}"
        assert (got["local_rank"], got["local_size"]) == (r % 2, 2), got
        assert (got["cross_rank"], got["cross_size"]) == (r // 2, 2), got
    # 3 ops x 4 MiB crossed between the hosts: each host link carried at least that much
    moved = {ns: _link_bytes(ns) - b for ns, b in before.items()}
    assert all(m >= 3 * 4 << 20 for m in moved.values()), moved
    summary = _ringscope("summarize", "--json", "--no-cache", trace)
    assert summary.returncode == 0, summary.stderr[-2000:]
    assert json.loads(summary.stdout)["run"]["hosts"] == {"h0": [0, 1], "h1": [2, 3]}
    text = _ringscope("summarize", "--full", "--no-cache", trace)
    assert "h0: ranks 0, 1; h1: ranks 2, 3" in text.stdout, text.stdout[:2000]
