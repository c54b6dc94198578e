"""The elastic driver behind ``ringscope run --elastic``: runs a job as a sequence of worlds.

MPI's world cannot shrink or grow, so each **generation** is one ``mpiexec`` world. The driver
serves a TCP control socket that every rank registers with at ``hvd.init()`` and keeps open, holds
the last committed state (rank 0 sends it at each ``commit()``), and:

- when a rank's connection closes without a goodbye (the rank died), it waits ``GRACE_S`` for
  others that died with it, stops the rest of the world (SIGTERM to mpiexec's process group, then
  SIGKILL: survivors may be blocked in a collective with the dead rank), drops the dead ranks'
  slots and starts the next world from the last commit; below ``--min-np`` it stops with one line;
- when the discovery script reports more slots (and the world is below ``--max-np``), the next
  ``commit()`` raises ``HostsUpdatedInterrupt`` on every rank, they exit cleanly, and the next
  world is the larger one.

With ``--timeline DIR`` each world writes ``DIR/gen-NNN/`` and the driver keeps
``DIR/elastic.json`` (see :mod:`collectives.elastic.journal` and docs/ELASTIC.md).
"""
from __future__ import annotations

import argparse
import copy
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectives.cluster import GATEWAY, check_hosts
from collectives.elastic import membership as M
from collectives.elastic import protocol
from collectives.elastic.journal import Journal, gen_dir

Build = Callable[[argparse.Namespace], tuple[list[str], dict[str, str]]]   # launcher.build
Reset = dict[str, Any]      # one record of elastic.json's "resets"
GRACE_S = 0.2          # ranks whose connections close this soon after a first death died with it
STOP_WAIT_S = 3.0      # SIGTERM (ranks finish their timelines) before SIGKILL
LOCAL_NAMES = {"localhost", "127.0.0.1", socket.gethostname()}


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, "") or default)
    except ValueError:
        return default


@dataclass
class RankInfo:
    rank: int
    host: str            # the slot's host, as in the membership
    pid: int
    goodbye: str | None = None
    goodbye_ns: int = 0
    detail: str = ""
    how: str = ""        # the guard's word on how it ended: "killed by signal 9"
    died_ns: int | None = None


@dataclass
class Generation:
    number: int
    hosts: M.Hosts
    step_base: int
    reset: dict[str, Any] | None
    record: dict[str, Any]
    ranks: dict[int, RankInfo] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    interrupt_ns: int | None = None     # the commit at which rank 0 learned of new hosts
    stopping: bool = False
    first_steps: int = 0

    @property
    def size(self) -> int:
        return M.total(self.hosts)


@dataclass
class Outcome:
    kind: str                  # done | failure | hosts_updated | error
    rc: int = 0
    lost: list[RankInfo] = field(default_factory=list)
    failed_ns: int | None = None
    detected_ns: int | None = None
    message: str = ""


class Driver:
    def __init__(self, ns: argparse.Namespace, members: M.Membership, build: Build):
        self.ns = ns
        self.members = members
        self.build = build                   # launcher.build(ns) -> (cmd, env)
        self.min_np = ns.min_np
        self.max_np = ns.max_np if ns.max_np is not None else sys.maxsize
        self.root = Path(ns.timeline).resolve() if ns.timeline else None
        self.journal = Journal(self.root, self.min_np, ns.max_np)
        self.lock = threading.Lock()
        self.events: queue.Queue = queue.Queue()
        self.committed = b""
        self.commit_step: int | None = None   # the tracer step current at the commit
        self.commit_ns: int | None = None
        self.gen: Generation | None = None
        self.launch_slots = 0                 # slots available when the current world started
        self.hosts_updated = False
        self.discovery_interval = _env_float("RINGSCOPE_ELASTIC_DISCOVERY_INTERVAL", 1.0)
        self.register_timeout = _env_float("RINGSCOPE_ELASTIC_REGISTER_TIMEOUT", 300.0)
        # only this host's ranks may reach the control socket unless other hosts can join
        local = (not members.discovery_script and not ns.cluster
                 and all(h in LOCAL_NAMES for h, _ in members.available()))
        self.server = socket.create_server(("127.0.0.1" if local else "", 0))
        self.port = self.server.getsockname()[1]
        self._stop_threads = threading.Event()

    # ---- the control socket ----------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._stop_threads.is_set():
            try:
                sock, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        stream = sock.makefile("rb")
        who: tuple[Generation, int] | None = None
        try:
            while True:
                msg, payload = protocol.recv(stream)
                if msg["op"] == "exit":   # a guard: its rank ended
                    protocol.send(sock, {"op": "ok", "wait": self._exited(msg)})
                    return
                if msg["op"] == "register":
                    who = self._register(msg)
                if who is None:   # a stale generation's rank, or not a rank at all
                    protocol.send(sock, {"op": "error", "error": "not a rank of this generation"})
                    return
                reply, out = self._handle(who, msg, payload)
                protocol.send(sock, reply, out)
        except (OSError, protocol.ProtocolError, ValueError, KeyError):
            pass
        finally:
            now = time.time_ns()
            sock.close()
            if who is not None:
                self.events.put(("closed", who[0].number, who[1], now))

    def _exited(self, msg: dict[str, Any]) -> bool:
        """A guard's report that its rank ended; True (the guard waits) when it died."""
        now = time.time_ns()
        with self.lock:
            gen = self.gen
            if gen is None or int(msg.get("generation", -1)) != gen.number or gen.stopping:
                return False
            r = int(msg["rank"])
            info = gen.ranks.get(r)
            if info is None:   # died before it registered
                info = gen.ranks[r] = RankInfo(r, M.host_of_rank(gen.hosts, r), int(msg["pid"]))
            if info.goodbye is not None:
                return False
            info.how = str(msg.get("how") or "")
        self.events.put(("closed", gen.number, r, now))
        return True

    def _register(self, msg: dict[str, Any]) -> tuple[Generation, int] | None:
        with self.lock:
            gen = self.gen
            if gen is None or int(msg.get("generation", -1)) != gen.number:
                return None
            r = int(msg["rank"])
            gen.ranks[r] = RankInfo(r, M.host_of_rank(gen.hosts, r), int(msg["pid"]))
            if len(gen.ranks) == gen.size and gen.reset is not None:
                gen.reset["reformed_epoch_ns"] = time.time_ns()
            return gen, r

    def _handle(self, who: tuple[Generation, int], msg: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
        gen, r = who
        op, now = msg["op"], time.time_ns()
        with self.lock:
            if op == "register":
                reset = None if gen.reset is None else {"state_bytes": len(self.committed)}
                return {"op": "registered", "reset": reset}, b""
            if op == "fetch":
                return {"op": "state"}, self.committed
            if op in ("commit", "hosts"):
                if op == "commit":
                    self.committed = payload
                    self.commit_step, self.commit_ns = int(msg["step"]), int(msg["epoch_ns"])
                if self.hosts_updated and gen.interrupt_ns is None:
                    gen.interrupt_ns = int(msg.get("epoch_ns") or now)
                return {"op": op, "hosts_updated": self.hosts_updated}, b""
            if op == "restored" and gen.reset is not None:
                gen.reset["restored_epoch_ns"] = max(gen.reset.get("restored_epoch_ns") or 0,
                                                     int(msg["epoch_ns"]))
            elif op == "first_step" and gen.reset is not None:
                gen.reset["first_step_end_epoch_ns"] = max(
                    gen.reset.get("first_step_end_epoch_ns") or 0, int(msg["epoch_ns"]))
                gen.first_steps += 1
                if gen.first_steps == gen.size:
                    self.journal.write()
                return dict(gen.reset, op="reset"), b""
            elif op == "goodbye":
                info = gen.ranks.get(r)
                if info is not None and info.goodbye is None:
                    info.goodbye, info.detail = str(msg.get("reason")), str(msg.get("detail") or "")
                    info.goodbye_ns = now
            return {"op": "ok"}, b""

    def _discover(self) -> None:
        warned = False
        while not self._stop_threads.wait(self.discovery_interval):
            try:
                self.members.refresh()
            except M.MembershipError as exc:
                if not warned:
                    print(f"ringscope run --elastic: {exc} (keeping the last hosts)", file=sys.stderr)
                    warned = True
                continue
            slots = M.total(self.members.available())
            with self.lock:
                gen = self.gen
                if gen is not None and slots > self.launch_slots and gen.size < self.max_np:
                    self.hosts_updated = True

    # ---- one world -------------------------------------------------------------------------------
    def _launch(self, gen: Generation) -> None:
        ns = copy.copy(self.ns)
        ns.np = gen.size
        local = all(h in LOCAL_NAMES for h, _ in gen.hosts)
        ns.hosts = None if local and not ns.cluster else ",".join(M.hosts_text(gen.hosts))
        ns.timeline = str(gen_dir(self.root, gen.number)) + "/" if self.root else None
        cmd, env = self.build(ns)
        cmd = _guarded(cmd, ns.np)
        env.update({protocol.ENV_DRIVER: self._address(local), protocol.ENV_GENERATION: str(gen.number),
                    protocol.ENV_STEP_BASE: str(gen.step_base)})
        gen.proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.PIPE)
        threading.Thread(target=_forward, args=(gen, gen.proc.stdout), daemon=True).start()

    def _address(self, local: bool) -> str:
        """Where a world's ranks find the control socket."""
        if self.ns.cluster:
            return f"{GATEWAY}:{self.port}"
        return f"{'127.0.0.1' if local else socket.gethostname()}:{self.port}"

    def _stop(self, gen: Generation) -> None:
        """End what is left of a world: SIGTERM to its ranks on this host (they finish their
        timelines; mpiexec's proxies would SIGKILL them at once), then to mpiexec's process
        group, then SIGKILL."""
        gen.stopping = True
        proc = gen.proc
        if proc is None or proc.poll() is not None:
            return
        with self.lock:
            pids = [i.pid for i in gen.ranks.values() if i.died_ns is None and i.host in LOCAL_NAMES]
        deadline = time.monotonic() + STOP_WAIT_S
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        while pids and time.monotonic() < deadline and proc.poll() is None:
            pids = [pid for pid in pids if _signal(pid, 0)]
            time.sleep(0.02)
        for sig, wait in ((signal.SIGTERM, STOP_WAIT_S), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def _supervise(self, gen: Generation) -> Outcome:
        """Wait for the world to end: done, a death, new hosts, or an error."""
        first_death: int | None = None
        grace_end = 0.0
        started = time.monotonic()
        exited_at: float | None = None
        while True:
            try:
                ev = self.events.get(timeout=0.05)
            except queue.Empty:
                ev = None
            if ev is not None and ev[1] == gen.number and not gen.stopping:
                info = gen.ranks.get(ev[2])
                if info is not None and info.goodbye is None:
                    info.died_ns = ev[3]
                    if first_death is None:
                        first_death, grace_end = ev[3], time.monotonic() + GRACE_S
            with self.lock:
                ranks = list(gen.ranks.values())
            # a rank that aborts (an error of the job) says so first; MPI_Abort then kills the
            # others, and those deaths are not lost slots
            abort_ns = min((i.goodbye_ns for i in ranks if i.goodbye == "abort"), default=None)
            if first_death is not None and (time.monotonic() >= grace_end or abort_ns is not None):
                detected = time.time_ns()
                lost = [i for i in ranks if i.died_ns is not None
                        and (abort_ns is None or i.died_ns < abort_ns)]
                self._stop(gen)
                if not lost:
                    return Outcome("error", 1, message=_aborted(ranks))
                return Outcome("failure", lost=lost, failed_ns=min(i.died_ns or 0 for i in lost),
                               detected_ns=detected)
            if ev is not None:
                continue
            rc = gen.proc.poll() if gen.proc else 0
            if rc is None:
                if len(ranks) < gen.size and time.monotonic() - started > self.register_timeout:
                    self._stop(gen)
                    return Outcome("error", 1, message=f"only {len(ranks)} of {gen.size} ranks "
                                   f"registered within {self.register_timeout:.0f} s")
                continue
            if exited_at is None:   # let the connection threads report the last closes
                exited_at = time.monotonic()
            if time.monotonic() - exited_at < 0.3 and any(i.goodbye is None for i in ranks):
                continue
            reasons = {i.goodbye for i in ranks}
            if len(ranks) == gen.size and reasons == {"hosts_updated"}:
                return Outcome("hosts_updated", failed_ns=gen.interrupt_ns,
                               detected_ns=time.time_ns())
            if len(ranks) == gen.size and reasons == {"done"}:
                return Outcome("done", rc)
            if any(i.goodbye == "abort" for i in ranks):
                return Outcome("error", rc or 1, message=_aborted(ranks))
            return Outcome("error", rc or 1, message=f"mpiexec exited with status {rc} "
                           f"({len(ranks)} of {gen.size} ranks registered)")

    # ---- the job ---------------------------------------------------------------------------------
    def main(self) -> int:
        signal.signal(signal.SIGTERM, _interrupt)   # a stopped driver stops its world too
        threading.Thread(target=self._accept, daemon=True).start()
        if self.members.discovery_script:
            threading.Thread(target=self._discover, daemon=True).start()
        number, reset, prev_hosts = 0, None, None
        try:
            while True:
                avail = self.members.available()
                want = self.max_np if number else min(self.ns.np, self.max_np)
                hosts = M.take(avail, min(M.total(avail), want))
                if M.total(hosts) < self.min_np:
                    return self._below_min(hosts, reset)
                gen = self._new_generation(number, hosts, reset, prev_hosts)
                out = self._supervise(gen)
                gen.record["end_epoch_ns"] = time.time_ns()
                gen.record["end"] = out.kind if out.kind != "error" else "failure"
                self.journal.write()
                if out.kind == "done":
                    return out.rc
                if out.kind == "error":
                    print(f"ringscope run --elastic: generation {number}: {out.message}",
                          file=sys.stderr)
                    return out.rc or 1
                reset = self._reset_record(gen, out)
                prev_hosts = gen.hosts
                for info in out.lost:
                    self.members.lose(info.host)
                number += 1
        except KeyboardInterrupt:
            if self.gen is not None:
                self._stop(self.gen)
            return 130
        finally:
            self._stop_threads.set()
            self.server.close()

    def _new_generation(self, number: int, hosts: M.Hosts, reset: Reset | None,
                        prev_hosts: M.Hosts | None) -> Generation:
        base = max(self.commit_step or 0, 0)
        record = {"generation": number, "size": M.total(hosts), "hosts": M.hosts_text(hosts),
                  "start_epoch_ns": time.time_ns(), "end_epoch_ns": None, "end": None,
                  "step_base": base}
        if reset is not None:
            added = _added(prev_hosts or [], hosts)
            reset.update(size_after=M.total(hosts), hosts_after=M.hosts_text(hosts), added=added)
            if reset["kind"] == "added":
                reset["cause"] = "the host discovery script reported new slots: " + ", ".join(
                    f"{a['host']} +{a['slots']}" for a in added)
            self.journal.data["resets"].append(reset)
            print(f"ringscope run --elastic: generation {number - 1}: {reset['cause']}; "
                  f"generation {number}: {M.total(hosts)} ranks from the last commit"
                  f" (trace step {base})", file=sys.stderr)
        self.journal.data["generations"].append(record)
        gen = Generation(number, hosts, base, reset, record)
        with self.lock:
            self.gen = gen
            self.hosts_updated = False
            self.launch_slots = M.total(self.members.available())
        self.journal.write()
        if reset is not None:
            reset["relaunched_epoch_ns"] = time.time_ns()
        self._launch(gen)
        return gen

    def _reset_record(self, gen: Generation, out: Outcome) -> dict[str, Any]:
        if out.kind == "failure":
            cause = "; ".join(f"rank {i.rank} (host {i.host}, pid {i.pid}) "
                              f"{'exited: ' + i.how if i.how else 'died (its control connection closed)'}"
                              for i in out.lost)
            lost = [{"rank": i.rank, "host": i.host, "pid": i.pid} for i in out.lost]
        else:
            cause, lost = "the host discovery script reported new slots", []
        return {"generation_before": gen.number, "generation_after": gen.number + 1,
                "kind": "lost" if out.kind == "failure" else "added", "cause": cause,
                "lost": lost, "added": [], "size_before": gen.size,
                "size_after": None, "hosts_before": M.hosts_text(gen.hosts), "hosts_after": None,
                "last_commit_epoch_ns": self.commit_ns,
                "last_commit_step": None if self.commit_step is None else self.commit_step - 1,
                "failed_epoch_ns": out.failed_ns, "detected_epoch_ns": out.detected_ns,
                "relaunched_epoch_ns": None, "reformed_epoch_ns": None, "restored_epoch_ns": None,
                "first_step_end_epoch_ns": None}

    def _below_min(self, hosts: M.Hosts, reset: Reset | None) -> int:
        if self.journal.data["generations"]:
            self.journal.data["generations"][-1]["end"] = "below_min_np"
            self.journal.write()
        cause = f"{reset['cause']}; " if reset else ""
        print(f"ringscope run --elastic: {cause}{M.total(hosts)} slot(s) left, below --min-np "
              f"{self.min_np}; stopping", file=sys.stderr)
        return 1


GUARD = Path(__file__).resolve().with_name("guard.py")


def _guarded(cmd: list[str], np: int) -> list[str]:
    """mpiexec's command with each rank started by its guard; mpiexec told not to end the world
    itself when a process dies (the driver decides)."""
    if cmd[1:3] != ["-n", str(np)]:
        raise ValueError(f"unexpected mpiexec command: {cmd[:4]}")
    at = 3
    while at < len(cmd) and cmd[at].startswith("-"):   # -hosts, -launcher ... and their values
        at += 2
    return [cmd[0], "-disable-auto-cleanup", *cmd[1:at], sys.executable, str(GUARD), *cmd[at:]]


# what mpiexec prints on stdout when a process of a world ends by a signal: after the driver
# stopped the world on purpose it only misleads ("a problem with your application")
_BANNER = (b"YOUR APPLICATION TERMINATED WITH THE EXIT STRING", b"This typically refers to a problem",
           b"Please see the FAQ page", b"=====", b"=   ")


def _forward(gen: Generation, src: Any) -> None:
    """Pass mpiexec's stdout (the ranks' output) on as it comes; once the driver is stopping the
    world, whole lines, without mpiexec's termination banner."""
    out = sys.stdout.buffer
    pending = b""
    while True:
        chunk = os.read(src.fileno(), 65536)
        if not chunk:
            break
        if not gen.stopping:
            out.write(chunk)
            out.flush()
            continue
        *whole, pending = (pending + chunk).split(b"\n")
        kept = [line for line in whole if line.strip() and not line.startswith(_BANNER)]
        if kept:
            out.write(b"\n".join(kept) + b"\n")
            out.flush()
    if pending and not pending.startswith(_BANNER):
        out.write(pending)
        out.flush()


def _aborted(ranks: list[RankInfo]) -> str:
    """The first rank that aborted, and why."""
    first = min((i for i in ranks if i.goodbye == "abort"), key=lambda i: i.goodbye_ns)
    return f"rank {first.rank} failed: {first.detail or 'see its error above'}"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _signal(pid: int, sig: int) -> bool:
    """Send ``sig`` to ``pid``; False when no such process is left."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _added(before: M.Hosts, after: M.Hosts) -> list[dict[str, Any]]:
    old = dict(before)
    return [{"host": h, "slots": n - old.get(h, 0)} for h, n in after if n > old.get(h, 0)]


def run(ns: argparse.Namespace, build: Build) -> int:
    """Run the elastic job of ``ringscope run --elastic`` (options parsed by the launcher)."""
    try:
        if ns.host_discovery_script:
            members = M.Membership(discovery_script=ns.host_discovery_script)
        elif ns.cluster:   # -H's hosts, or every host of the rehearsal cluster
            members = M.Membership(M.parse_hosts(check_hosts(ns.hosts), "--cluster"))
        else:
            members = M.Membership(M.parse_hosts(ns.hosts, "-H") if ns.hosts
                                   else [("localhost", ns.np)])
    except (M.MembershipError, RuntimeError) as exc:   # RuntimeError: cluster.ClusterError
        print(f"ringscope run: {exc}", file=sys.stderr)
        return 2
    return Driver(ns, members, build).main()
