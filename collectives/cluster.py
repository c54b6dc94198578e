"""``ringscope cluster up|hosts|down``: a rehearsal cluster of namespaced hosts on this machine.

Each host ``hK`` is a network namespace ``rscope-hK`` with its own stack: loopback, and ``rscope0``
(one end of a veth pair) at 10.213.0.(10+K)/24. The other end, ``rscope-hK``, hangs off the bridge
``rscope-br`` at 10.213.0.1, where this machine (and mpiexec) sits. With ``--rate`` both ends of each
host's link carry a tbf rate limiter, so the limit holds in each direction. ``ip netns exec``
mounts ``/etc/netns/rscope-hK/hosts`` over ``/etc/hosts``, so inside a host the cluster's names and
this machine's hostname resolve to cluster addresses.

Everything made is named with the ``rscope`` prefix and recorded in a state file; ``down`` removes
what the state names and anything else with the prefix (so it also cleans up after a crash), and
kills the processes left inside the namespaces. Needs root.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PREFIX = "rscope"
BRIDGE = f"{PREFIX}-br"
HOST_IFACE = f"{PREFIX}0"          # the host's interface inside its namespace
SUBNET = "10.213.0"
GATEWAY = f"{SUBNET}.1"
STATE = Path("/run/ringscope/cluster.json")
NETNS_ETC = Path("/etc/netns")
MAX_HOSTS = 200
LAUNCHER = Path(__file__).resolve().with_name("cluster_ssh")   # hydra's -launcher-exec
# for the ranks: MPICH's network module carries inter-host traffic over the host's cluster
# interface by TCP only (UCX, the wheel's default, would use shared memory across namespaces of
# one kernel); torch's gloo groups bind the same interface
MPI_ENV = {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": HOST_IFACE,
           "GLOO_SOCKET_IFNAME": HOST_IFACE}
_RATE = re.compile(r"(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)$")
_RATE_SCALE = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


class ClusterError(RuntimeError):
    """A cluster command cannot go on; the message is one line for the user."""


def netns_name(host: str) -> str:
    return f"{PREFIX}-{host}"


def host_name(k: int) -> str:
    return f"h{k}"


def host_addr(k: int) -> str:
    return f"{SUBNET}.{10 + k}"


def root_problem() -> str | None:
    """Why cluster commands cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces and veth links); run it as root"
    missing = [name for bit, name in ((12, "CAP_NET_ADMIN"), (21, "CAP_SYS_ADMIN")) if not _capable(bit)]
    if missing:
        return f"needs root with {' and '.join(missing)} (network namespaces); this root lacks them"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"needs the {tool!r} command (iproute2)"
    return None


def _capable(bit: int) -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    except OSError:
        pass
    return True   # cannot tell: let the commands themselves say


def rate_bits(rate: str) -> float:
    """Bits per second for a tc rate such as ``1gbit`` or ``250mbit``; ValueError otherwise."""
    m = _RATE.match(rate.strip().lower())
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"--rate {rate!r}: expected a positive rate like 1gbit, 250mbit or 500kbit")
    return float(m.group(1)) * _RATE_SCALE[m.group(2)]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise ClusterError(f"ip {' '.join(args)}: {proc.stderr.strip() or 'failed'}")
    return proc


def _tc(*args: str) -> None:
    proc = subprocess.run(["tc", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClusterError(f"tc {' '.join(args)}: {proc.stderr.strip() or 'failed'}")


def read_state() -> dict | None:
    """The running cluster's description (hosts, slots, rate), or None when none is up."""
    try:
        return json.loads(STATE.read_text())
    except (OSError, ValueError):
        return None


def our_netns() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [w.split()[0] for w in out.splitlines() if w.split() and w.split()[0].startswith(PREFIX + "-")]


def our_links() -> list[str]:
    out = _ip("-o", "link", "show", check=False).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]
    return [n for n in names if n.startswith(PREFIX + "-")]


def leftovers() -> list[str]:
    """What of ours exists now: namespaces, links, hosts files and the state file."""
    found = [f"netns {n}" for n in our_netns()] + [f"link {n}" for n in our_links()]
    if NETNS_ETC.is_dir():
        found += [f"dir {p}" for p in sorted(NETNS_ETC.glob(PREFIX + "-*"))]
    if STATE.exists():
        found.append(f"file {STATE}")
    return found


def _tbf(dev: str, bits: float, netns: str | None = None) -> None:
    # the bucket holds at least one timer tick (4 ms at HZ=250) of traffic, and a few full frames
    burst = max(int(bits / 8 * 0.004), 64 * 1024)
    where = ["-n", netns] if netns else []
    _tc(*where, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{int(bits)}bit",
        "burst", str(burst), "latency", "50ms")


def _hosts_file(n: int) -> str:
    lines = ["127.0.0.1\tlocalhost", f"{GATEWAY}\t{PREFIX}-gateway {socket.gethostname()}"]
    lines += [f"{host_addr(k)}\t{host_name(k)}" for k in range(n)]
    return "\n".join(lines) + "\n"


def up(n: int, slots: int, rate: str | None = None) -> dict:
    """Create ``n`` hosts of ``slots`` slots (idempotent for the same layout); returns the state."""
    if not 1 <= n <= MAX_HOSTS:
        raise ClusterError(f"--hosts must be between 1 and {MAX_HOSTS}")
    if slots < 1:
        raise ClusterError("--slots must be at least 1")
    bits = rate_bits(rate) if rate else None
    hosts = [{"name": host_name(k), "netns": netns_name(host_name(k)), "addr": host_addr(k), "slots": slots}
             for k in range(n)]
    want: dict[str, Any] = {"hosts": hosts, "bridge": BRIDGE, "gateway": GATEWAY, "iface": HOST_IFACE,
                            "rate": rate}
    have = read_state()
    present = set(our_netns())
    if have is not None and all(h["netns"] in present for h in have["hosts"]):
        if have == want:
            return have
        raise ClusterError(f"a cluster of {len(have['hosts'])} host(s) is up already; "
                           "run `ringscope cluster down` first")
    down()   # whatever a crashed run left behind
    routes = _ip("-o", "route", "show", "to", "match", f"{SUBNET}.0/24", check=False).stdout.splitlines()
    taken = [r.strip() for r in routes if r.startswith(f"{SUBNET}.")]
    if taken:
        raise ClusterError(f"{SUBNET}.0/24 is in use on this machine already: {taken[0]}")
    try:
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        for h in want["hosts"]:
            ns, name = h["netns"], h["name"]
            _ip("netns", "add", ns)
            _ip("link", "add", ns, "type", "veth", "peer", "name", HOST_IFACE, "netns", ns)
            _ip("link", "set", ns, "master", BRIDGE, "up")
            _ip("-n", ns, "addr", "add", f"{h['addr']}/24", "dev", HOST_IFACE)
            _ip("-n", ns, "link", "set", HOST_IFACE, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            if bits:
                _tbf(ns, bits)                  # towards the host
                _tbf(HOST_IFACE, bits, ns)      # from the host
            etc = NETNS_ETC / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(_hosts_file(n))
            (etc / "hostname").write_text(name + "\n")
        STATE.parent.mkdir(parents=True, exist_ok=True)
        STATE.write_text(json.dumps(want, indent=1) + "\n")
    except BaseException:
        down()
        raise
    return want


def netns_inodes(names: list[str]) -> set[int]:
    """The inode of each named namespace that exists (what ``/proc/PID/ns/net`` of a process in it has)."""
    out = set()
    for ns in names:
        try:
            out.add(os.stat(f"/run/netns/{ns}").st_ino)
        except OSError:
            pass
    return out


def processes_in(inodes: set[int]) -> list[int]:
    """Processes whose network namespace is one of ``inodes``."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if os.stat(p / "ns" / "net").st_ino in inodes:
                    pids.append(int(p.name))
            except OSError:
                pass
    return pids


def _kill_inside(inodes: set[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = set(processes_in(inodes)) - {os.getpid()}
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 2.0
        while pids and time.monotonic() < deadline:
            time.sleep(0.05)
            pids = {p for p in pids if Path(f"/proc/{p}").exists()}
        if not pids:
            return


def down() -> list[str]:
    """Remove every namespace, link and file of ours (idempotent); returns what it removed."""
    removed = leftovers()
    state = read_state() or {"hosts": []}
    names = sorted(set(our_netns()) | {h["netns"] for h in state["hosts"]})
    inodes = netns_inodes(names)
    _kill_inside(inodes)
    for ns in names:
        _ip("netns", "del", ns, check=False)
    _kill_inside(inodes)   # any that entered a namespace while the first round ran
    for link in our_links():
        _ip("link", "del", link, check=False)
    if NETNS_ETC.is_dir():
        for d in NETNS_ETC.glob(PREFIX + "-*"):
            shutil.rmtree(d, ignore_errors=True)
    STATE.unlink(missing_ok=True)
    for d in (STATE.parent, NETNS_ETC):
        try:
            d.rmdir()   # only when empty: others may keep files there
        except OSError:
            pass
    left = leftovers()
    if left:
        raise ClusterError(f"could not remove {', '.join(left)}")
    return removed


def check_hosts(spec: str | None) -> str:
    """The ``-hosts`` value for ``ringscope run --cluster``: ``spec`` (``host[:slots],...``) once its
    hosts are checked against the cluster, or every cluster host when it is None."""
    state = read_state()
    if state is None or not set(our_netns()) >= {h["netns"] for h in state["hosts"]}:
        raise ClusterError("--cluster: no cluster is up (ringscope cluster up --hosts N --slots S)")
    if not spec:
        return ",".join(host_specs(state))
    names = {h["name"] for h in state["hosts"]}
    unknown = [w.split(":")[0] for w in spec.split(",") if w.split(":")[0] not in names]
    if unknown:
        raise ClusterError(f"--cluster: {', '.join(unknown)} not in the cluster (its hosts: "
                           f"{', '.join(host_specs(state))})")
    return spec


def host_specs(state: dict) -> list[str]:
    """``name:slots`` per host, as ``-H`` takes them."""
    return [f"{h['name']}:{h['slots']}" for h in state["hosts"]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ringscope cluster",
                                description="A rehearsal cluster of namespaced hosts on this machine.")
    sub = p.add_subparsers(dest="action", required=True)
    u = sub.add_parser("up", help="create N hosts on a private subnet behind a bridge")
    u.add_argument("--hosts", type=int, required=True, help="number of hosts")
    u.add_argument("--slots", type=int, default=1, help="slots (ranks) per host")
    u.add_argument("--rate", help="limit each host's link to this rate, each way (e.g. 1gbit)")
    sub.add_parser("hosts", help="print the hosts, one a line, as -H takes them")
    sub.add_parser("down", help="remove everything `up` made (idempotent)")
    ns = p.parse_args(sys.argv[1:] if argv is None else argv)
    problem = root_problem()
    if problem:
        print(f"ringscope cluster: {problem}", file=sys.stderr)
        return 2
    try:
        if ns.action == "up":
            if ns.rate:
                rate_bits(ns.rate)
            state = up(ns.hosts, ns.slots, ns.rate)
            rate = f", links limited to {state['rate']} each way" if state["rate"] else ""
            print(f"ringscope cluster: {len(state['hosts'])} host(s) up on {SUBNET}.0/24{rate}",
                  file=sys.stderr)
            print("\n".join(host_specs(state)))
        elif ns.action == "hosts":
            running = read_state()
            if running is None:
                print("ringscope cluster: no cluster is up (ringscope cluster up --hosts N --slots S)",
                      file=sys.stderr)
                return 1
            print("\n".join(host_specs(running)))
        else:
            removed = down()
            print(f"ringscope cluster: removed {len(removed)} item(s)" if removed
                  else "ringscope cluster: nothing to remove", file=sys.stderr)
    except (ClusterError, ValueError) as exc:
        print(f"ringscope cluster: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
