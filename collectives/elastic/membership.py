"""Which slots an elastic job may use: ``-H host:slots,...`` / ``-np`` or a discovery script, less
the slots that failed.

A failed rank costs its slot, not its whole host (``localhost:4`` with one rank killed is
``localhost:3``). The discovery script prints one ``host[:slots]`` per line; it is run again every
interval by the driver, and a host it stops printing is simply not used by the next world.
"""
from __future__ import annotations

import subprocess
import threading
from collections import Counter

Hosts = list[tuple[str, int]]   # [(host, slots)], in launch order


class MembershipError(ValueError):
    """Bad hosts text or a discovery script that fails: one line for the user."""


def parse_hosts(text: str, where: str) -> Hosts:
    """``h1:2,h2`` (commas or lines; slots default to 1) as [(host, slots)]."""
    out: dict[str, int] = {}
    for item in text.replace("\n", ",").split(","):
        item = item.strip()
        if not item or item.startswith("#"):
            continue
        host, _, slots = item.partition(":")
        if not host or (slots and not slots.strip().isdigit()):
            raise MembershipError(f"{where}: {item!r} is not host[:slots]")
        out[host] = out.get(host, 0) + (int(slots) if slots else 1)
    return list(out.items())


def hosts_text(hosts: Hosts) -> list[str]:
    return [f"{h}:{n}" for h, n in hosts]


def total(hosts: Hosts) -> int:
    return sum(n for _, n in hosts)


def take(hosts: Hosts, size: int) -> Hosts:
    """The first ``size`` slots of ``hosts``, host by host (the order mpiexec places ranks in)."""
    out: Hosts = []
    for h, n in hosts:
        k = min(n, size - total(out))
        if k > 0:
            out.append((h, k))
    return out


def host_of_rank(hosts: Hosts, rank: int) -> str:
    for h, n in hosts:
        if rank < n:
            return h
        rank -= n
    raise IndexError(rank)


class Membership:
    """The slots known now: static hosts, or the discovery script's latest answer; minus failures."""

    def __init__(self, hosts: Hosts | None = None, discovery_script: str | None = None,
                 timeout_s: float = 10.0):
        self.discovery_script = discovery_script
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._known: Hosts = list(hosts or [])
        self.failed: Counter[str] = Counter()
        if discovery_script:
            self._known = self.discover()

    def discover(self) -> Hosts:
        """Run the discovery script once; its hosts (MembershipError when it fails)."""
        assert self.discovery_script
        try:
            proc = subprocess.run([self.discovery_script], capture_output=True, text=True,
                                  timeout=self.timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise MembershipError(f"host discovery script {self.discovery_script}: {exc}") from None
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [""])[-1]
            raise MembershipError(f"host discovery script {self.discovery_script} exited "
                                  f"{proc.returncode}{': ' + last if last else ''}")
        return parse_hosts(proc.stdout, f"host discovery script {self.discovery_script}")

    def refresh(self) -> None:
        """Ask the discovery script again (no-op for static hosts)."""
        if self.discovery_script:
            found = self.discover()
            with self._lock:
                self._known = found

    def lose(self, host: str, slots: int = 1) -> None:
        with self._lock:
            self.failed[host] += slots

    def available(self) -> Hosts:
        with self._lock:
            return [(h, n - self.failed[h]) for h, n in self._known if n - self.failed[h] > 0]
