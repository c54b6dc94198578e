"""The background engine: one thread per process that does every MPI call.

The user's thread only enqueues entries (:meth:`Engine.enqueue`) and waits on handles. Each cycle
the engine sends this rank's new requests to the coordinator (rank 0), and executes the responses
it gets back in order. It sleeps while this rank has nothing in flight, and polls with short sleeps
(never spinning) while it waits for other ranks. Admission, the submit queue, the ops in flight,
their completion and the handles are the native core's (collectives/core/: a thread that waits
sleeps there with the GIL released).

With the response cache on (``cache_capacity`` > 0), an allreduce negotiated once is kept under a
cache bit and negotiated again by the bit rounds (bit_rounds.py): no message to rank 0. The rounds
also decide when the coordinator's responses run, so both paths keep one order on every rank.

Imported where used: mpi4py.MPI (MPI is started by ``collectives.init``, not at import), and
numpy, bit_rounds and adapters, which import numpy (it stays out of ``import collectives``).
"""
from __future__ import annotations

import sys
import threading
import time
import traceback

from collectives import engine_trace as trace
from collectives import messages as M
from collectives import mpi_wait
from collectives._core import SubmitQueue, prepare_setup, route
from collectives.config import cpu_backend
from collectives.coordinator import Coordinator
from collectives.entry import Entry
from collectives.executor import Executor
from collectives.fatal import abort
from collectives.fusion import FusionBuffers
from collectives.handles import Handle
from collectives.ops import ReduceOp, as_op
from collectives.submit import prepare, request_of
from tracer import clock, get_recorder
from tracer import vocab as V

IDLE_POLL_MAX_S = 1e-3     # rank 0 with nothing in flight still listens for requests this often
STALL_SCAN_S = 0.1         # how often cached tensors pending long are looked for (stall reports)
_ENGINE = None


def get_engine() -> Engine:
    """The running engine; raises when ``collectives.init()`` has not been called."""
    if _ENGINE is None:
        raise ValueError("ringscope is not initialized; call collectives.init() first")
    return _ENGINE


def set_engine(engine) -> None:
    global _ENGINE
    _ENGINE = engine


class Engine:
    def __init__(self, config, world, ctrl, sets):
        self.config, self.world, self.ctrl, self.sets = config, world, ctrl, sets
        self.rank, self.size = world.Get_rank(), world.Get_size()
        from mpi4py import MPI
        self._any_source = MPI.ANY_SOURCE
        # admission, the submit queue, the ops in flight (name -> entry) and their completion
        self._ops = SubmitQueue(M.CONTROL_OPS, self.rank)
        import numpy as np

        from collectives.adapters import NUMPY
        prepare_setup(NUMPY, np.ndarray, ReduceOp)   # host arrays' allreduces are filled in C
        self._cpu_backend = cpu_backend(config)
        self._inflight: dict = self._ops.inflight
        self._names = threading.Lock()
        self._noname: dict = {}
        self._sends: list = []
        self._ready = trace.ReadyTicks()
        self._stop = False
        self.closed = False
        self.fatal: str | None = None
        self._cycle = 0
        self.stats = {"responses": 0, "tensors": 0, "max_fused": 0, "max_fused_bytes": 0,
                      "errors": 0, "cached_responses": 0}
        self._coord = Coordinator(config, sets) if self.rank == 0 else None
        self._exec = Executor(config, sets, FusionBuffers(), self._complete_many)
        # the response cache's rounds run on a communicator of their own (created on every rank)
        self._rounds = None
        if config.cache_capacity > 0:
            from collectives._round import wait as round_wait
            from collectives.bit_rounds import BitRounds
            self._rounds = BitRounds(world.Dup(), sets, config)
            self._round_wait = round_wait
        # what the engine waits for on ctrl: requests (rank 0, the coordinator), else responses
        self._ctrl_f = ctrl.py2f()
        self._listen = (MPI.ANY_SOURCE, M.TAG_REQUEST) if self.rank == 0 else (0, M.TAG_RESPONSE)
        self._pauses = 0   # checks that found nothing since the last work (the waits' back-off)
        self._queued: list = []      # the coordinator's responses, until a round orders them
        self._reported: set = set()  # (set, name) of cached tensors reported as pending long
        self._stall_scan = 0.0
        self._thread = threading.Thread(target=self._main, name="ringscope-engine", daemon=True)
        trace.track(self._inflight)

    def start(self) -> None:
        self._thread.start()

    # ---- user thread -------------------------------------------------------------------------
    def enqueue(self, entry) -> Handle:
        """Submit one op; returns its :class:`Handle`. Raises ValueError on a duplicate name."""
        if entry.name is None:
            entry.name = self.noname(entry.op_type.lower(), entry.process_set)
        if entry.process_set == 0:   # (every rank is a member): a host array's allreduce, in C
            h = self._ops.submit(entry, self._cpu_backend)
            if h is not None:
                return h
        prepare(entry, self.config, self.sets, self.rank)
        return self._ops.admit((entry,))[0]

    def enqueue_control(self, entry, shape) -> Handle:
        """Submit a control op (process-set changes); ``shape`` carries its argument."""
        prepare(entry, self.config, self.sets, self.rank)
        entry.shape = tuple(shape)
        return self._ops.admit((entry,))[0]

    def enqueue_group(self, entries, group: str | None) -> list:
        """Submit entries negotiated together (and fused into one response when ``group``)."""
        self._ops.check_open()
        for e in entries:
            if e.name is None:
                e.name = self.noname(e.op_type.lower(), e.process_set)
        for e in entries:
            prepare(e, self.config, self.sets, self.rank)
            if group is not None:
                e.group, e.group_size = group, len(entries)
        return self._ops.admit(entries)

    def hold(self):
        """A context in which the engine takes no submission, so that a burst submitted inside it
        is taken at once (tests, benches)."""
        return self._ops

    def noname(self, prefix: str, process_set: int) -> str:
        """A deterministic name: members of a set number their unnamed ops in the same order."""
        with self._names:
            key = (prefix, process_set)
            n = self._noname.get(key, 0)
            self._noname[key] = n + 1
        return f"{prefix}.noname.{n}" if process_set == 0 else f"{prefix}.ps{process_set}.noname.{n}"

    def _refuse_new(self) -> None:
        """Admissions fail from now on (shut down); a failed engine's own refusal stands."""
        if not self.fatal:
            self._ops.refuse(ValueError, "ringscope is shut down; call collectives.init() again first")

    def shutdown(self) -> None:
        """Negotiate the shutdown with every rank, then stop the thread (blocks until done)."""
        if self._thread.is_alive() and not self.fatal and not self._stop:
            h = self.enqueue(Entry("__shutdown__", M.SHUTDOWN, None, None))
            try:
                h.wait()
            except Exception:
                pass
        self._thread.join()
        if self._rounds is not None and not self.fatal:
            self._rounds.comm.Free()
        self.closed = True
        self._refuse_new()
        trace.untrack(self._inflight)

    # ---- background thread -------------------------------------------------------------------
    def _main(self):
        try:
            self._loop()
            for req in self._sends:
                mpi_wait.wait(req)
            self._sends.clear()
        except BaseException as exc:  # a dead engine must not leave other ranks hanging
            self._die(exc)

    def _loop(self):
        backoff = mpi_wait.Backoff(sleep=self._nap)
        idle_s = 20e-6
        while not self._stop:
            new = ()
            if self._ops.pending or self._idle():
                if not self._ops.pending:   # nothing to do: sleep until a submission
                    self._ops.wait(self._idle_timeout(idle_s))
                    idle_s = min(idle_s * 2, IDLE_POLL_MAX_S)
                new = self._ops.take()
            rec = get_recorder()
            t0 = rec.now() if rec.mark_cycles else 0
            did = False
            if new:
                if self._rounds is not None:
                    self._rounds.wake(time.monotonic())
                self._send_requests(new)
                did = True
            if self._sends:
                self._sends = [r for r in self._sends if not r.Test()]
            did = (self._coordinate() if self._coord is not None else self._receive()) or did
            if self._rounds is not None and not self._stop:
                did = self._round_step() or did
            if did and rec.enabled:   # the counters only move when something happened
                # plain reads (a cycle late is fine); written only when changed
                trace.queue_counters(rec, len(self._inflight), self._ops.bytes_in_flight)
            if did:
                idle_s = 20e-6
                backoff.reset()
                self._cycle += 1
                if rec.mark_cycles:
                    rec.complete(V.TID_CYCLES, V.CYCLE, V.CAT_CYCLE, t0, rec.now(),
                                 {V.ARG_CYCLE: self._cycle})
            elif self._rounds is not None:
                self._wait_in_core()
            elif not self._idle():
                backoff.pause()
            if did:
                self._pauses = 0

    def _wait_in_core(self) -> None:
        """Wait in the core with the GIL released until the round in flight ends, a message comes,
        this rank submits (while no round is in flight) or something is due: the next round, the
        coordinator's flush, the stall scan."""
        rounds, now = self._rounds, time.monotonic()
        timeout = STALL_SCAN_S
        if not rounds.round.pending:
            timeout = min(timeout, rounds.wait_s(now))
        if self._coord is not None:
            wake = self._coord.wake_in(now)
            if wake is not None:
                timeout = min(timeout, wake)
        why, self._pauses = self._round_wait(
            rounds.round, self._ctrl_f, self._listen[0], self._listen[1], self._ops, timeout,
            self._pauses, mpi_wait.SPIN_TESTS, mpi_wait.YIELD_TESTS, mpi_wait.FIRST_SLEEP_S,
            max(mpi_wait.MAX_SLEEP_S, rounds.idle_nap_s()))
        if why:
            self._pauses = 0

    def _nap(self, seconds: float) -> None:
        """Sleep while waiting on other ranks, but wake at once when this rank submits more."""
        if self._rounds is not None:   # every rank idle: the rounds are slow, so are the naps
            seconds = max(seconds, self._rounds.idle_nap_s())
        if not self._stop:
            self._ops.wait(seconds)   # returns at once when something was submitted

    def _idle(self) -> bool:
        if self._rounds is not None:   # the rounds go on every cycle
            return False
        return not self._inflight and not self._sends and \
            (self._coord is None or not self._coord.busy())

    def _idle_timeout(self, idle_s):
        if self._coord is None:
            return 0.5
        wake = self._coord.wake_in(time.monotonic())
        return idle_s if wake is None else min(idle_s, wake)

    def _send_requests(self, entries, report=0):
        if self._rounds is not None and not report:
            entries = self._route(entries)
            if not entries:
                return
        reqs = [request_of(e, self.rank) for e in entries]
        if report:
            now_ns = clock.mono_ns()
            for r, e in zip(reqs, entries):
                r.report, r.waited_s = report, (now_ns - e.submit_ns) / 1e9
        if self._coord is not None:
            now = time.monotonic()
            self._ready.note(reqs)
            for r in reqs:
                self._coord.add(r, now)
        else:
            self._sends.append(self.ctrl.isend((self.rank, reqs), dest=0, tag=M.TAG_REQUEST))

    def _route(self, entries) -> list:
        """Put cache hits under their bits (and stale ones aside, in the core); return what goes
        to rank 0."""
        rounds = self._rounds
        full = entries if rounds.bypass else route(entries, rounds.caches)
        for e in full:   # (no cache holds a join or a shutdown)
            if e.op_type == V.JOIN:
                rounds.joined = True
            elif e.op_type == M.SHUTDOWN:
                rounds.leaving = True
        return full

    def _round_step(self) -> bool:
        """Finish the round in flight (running what it decided), post the next when due."""
        rounds = self._rounds
        res = rounds.test()
        did = res is not None and self._apply_round(res)
        now = time.monotonic()
        if res is not None:
            rounds.retry(now)
        # (also while a round is in flight: a stopped or dead rank never finishes it, and only the
        # stall inspector's errors free the others then)
        if not self._stop and now >= self._stall_scan and (self.config.stall_check_s > 0
                                                           or self.config.stall_shutdown_s > 0):
            self._stall_scan = now + STALL_SCAN_S
            self._report_stalls()
        if not self._stop and rounds.due(now):
            rounds.post(now, idle=not self._inflight and not self._queued)
        return did

    def _apply_round(self, res) -> bool:
        """Run what a round decided, in the order every rank follows."""
        rounds, did = self._rounds, False
        for sid, bits in res.invalid.items():
            back = []
            for bit in bits:
                rounds.caches[sid].invalidate(bit)
                e = rounds.pending[sid].pop(bit, None)
                if e is not None:
                    back.append(e)
                back += rounds.stale[sid].pop(bit, [])
            if back:
                self._send_requests(back)
                did = True
        if res.known > rounds.next_id:
            batch = [q for q in self._queued if q.id < res.known]
            self._queued = self._queued[len(batch):]
            rounds.next_id = res.known
            if batch:
                self._execute(batch)
                did = True
            if self._stop:
                return True
        if not res.all_joined:   # (all joined: every rank would only stand in)
            thr = self.config.fusion_threshold
            for sid, bits in res.ready.items():
                if bits and sid in rounds.caches:
                    for resp, entries in rounds.responses(sid, bits, thr, self.rank):
                        self._run_cached(resp, entries)
                        did = True
        if res.leaving and not rounds.bypass:   # rank 0 fails what waits on a rank that left
            rounds.bypass = True
            back = rounds.take_all()
            if back:
                self._send_requests(back)
                did = True
        return did

    def _run_cached(self, resp, entries):
        rec = get_recorder()
        t_response = rec.now() if rec.enabled else None
        if resp.joined:
            entries = [e if e is not None else self._stand_in(resp, n)
                       for e, n in zip(entries, resp.names)]
        else:
            self._count(resp, entries)
            self.stats["cached_responses"] += 1
        self._exec.run(resp, entries, t_response)
        if self._reported:
            done = [e for e in entries if (e.process_set, e.name) in self._reported]
            if done:
                self._reported.difference_update((e.process_set, e.name) for e in done)
                self._send_requests(done, report=M.STALL_WITHDRAW)

    def _report_stalls(self):
        """Tell the coordinator's stall inspector about cached tensors pending for long here (it
        names the ranks that have not submitted them)."""
        after = min(s for s in (self.config.stall_check_s, self.config.stall_shutdown_s) if s > 0)
        limit = clock.mono_ns() - int(after * 1e9 / 2)
        late = [e for e in self._rounds.pending_since(limit)
                if (e.process_set, e.name) not in self._reported]
        if late:
            self._reported.update((e.process_set, e.name) for e in late)
            self._send_requests(late, report=M.STALL_REPORT)

    def _coordinate(self) -> bool:
        did = False
        arrived = []
        while True:
            msg = self.ctrl.improbe(source=self._any_source, tag=M.TAG_REQUEST)
            if msg is None:
                break
            _, reqs = mpi_wait.wait_obj(msg.irecv())
            now = time.monotonic()
            for r in reqs:
                self._coord.add(r, now)
            arrived += reqs
            did = True
        if arrived:   # the messages drained together (a READY line each)
            self._ready.note(arrived)
        plan = self._coord.plan(time.monotonic())
        if not plan:
            if self._ready.held:
                self._ready.record()
            return did
        if any(resp.op_type == M.SHUTDOWN for resp, _ in plan):
            plan = self._coord.shutdown_errors() + plan
        batches: dict = {}
        for resp, members in plan:
            for m in members:
                batches.setdefault(m, []).append(resp)
        known = self._coord.next_id
        for m, batch in batches.items():
            if m != self.rank:
                self._sends.append(self.ctrl.isend((known, batch), dest=m, tag=M.TAG_RESPONSE))
        if self._rounds is not None:   # every rank learns the ids it will not get (rounds order)
            for m in range(self.size):
                if m != self.rank and m not in batches:
                    self._sends.append(self.ctrl.isend((known, []), dest=m, tag=M.TAG_RESPONSE))
        if self._ready.held:
            self._ready.record()
        if self._rounds is not None:
            self._queue_responses(batches.get(self.rank, []))
            self._rounds.known = known
            self._rounds.wake(time.monotonic())
        elif self.rank in batches:
            self._execute(batches[self.rank])
        return True

    def _receive(self) -> bool:
        did = False
        while not self._stop:
            msg = self.ctrl.improbe(source=0, tag=M.TAG_RESPONSE)
            if msg is None:
                break
            known, batch = mpi_wait.wait_obj(msg.irecv())
            if self._rounds is None:
                self._execute(batch)
            else:
                self._queue_responses(batch)
                self._rounds.known = known
                self._rounds.wake(time.monotonic())
            did = True
        return did

    def _queue_responses(self, batch):
        """Hold the coordinator's responses for the round that orders them on every rank; an
        error runs no collective, so it is applied at once (a rank that stopped, holding up every
        round, must not keep the others from their stall errors)."""
        errors = [r for r in batch if r.op_type == M.ERROR]
        if errors:
            self._execute(errors)
            batch = [r for r in batch if r.op_type != M.ERROR]
        self._queued += batch

    def _execute(self, batch):
        rec = get_recorder()   # when the responses arrived (their ops' negotiations ended)
        t_response = rec.now() if rec.enabled else None
        for resp in batch:
            entries = [self._inflight.get(n) for n in resp.names]
            if resp.op_type == M.ERROR:
                self.stats["errors"] += 1
                for e in entries:
                    if e is not None:
                        if self._rounds is not None:
                            self._rounds.forget(e)
                        self._complete(e, error=resp.error)
            elif resp.op_type == M.SHUTDOWN:
                self._stop = True
                self._refuse_new()
                for e in list(self._inflight.values()):
                    if e.op_type != M.SHUTDOWN:
                        self._complete(e, error="ringscope: shut down before this op completed")
                for e in entries:
                    self._complete(e, None)
            elif resp.op_type in (M.ADD_PROCESS_SET, M.REMOVE_PROCESS_SET):
                self._change_sets(resp, entries[0])
            elif resp.op_type == V.JOIN:
                if self._rounds is not None:
                    self._rounds.joined = False
                for e in entries:
                    if e is not None:
                        self._complete(e, resp.root)
            elif self.rank in resp.joined:
                entries = [self._stand_in(resp, n) for n in resp.names]
                self._exec.run(resp, entries, t_response)
                self._keep(resp, entries)
            elif None in entries:
                missing = [n for n, e in zip(resp.names, entries) if e is None]
                raise RuntimeError(f"response {resp.id} names tensors this rank never submitted: "
                                   f"{missing}")
            else:
                self._count(resp, entries)
                self._exec.run(resp, entries, t_response)
                self._keep(resp, entries)

    def _count(self, resp, entries):
        stats = self.stats
        stats["responses"] += 1
        stats["tensors"] += len(entries)
        stats["max_fused"] = max(stats["max_fused"], len(entries))
        if len(entries) > 1:   # (a response's bytes are its tensors')
            stats["max_fused_bytes"] = max(stats["max_fused_bytes"], resp.nbytes)

    def _keep(self, resp, entries):
        """Every member caches a cacheable response at the same point of the common order."""
        if resp.cacheable and self._rounds is not None:
            self._rounds.cache(resp.process_set).put(resp, entries)

    def _stand_in(self, resp, name):
        """A zero tensor for a rank that joined: it takes part in the others' allreduce."""
        from collectives.adapters import get_adapter, zeros
        ad = get_adapter(resp.adapter)
        shape = tuple(resp.shapes[name])
        numel = 1
        for d in shape:
            numel *= d
        e = Entry(name, resp.op_type, zeros(ad, numel, resp.dtype, resp.device), ad,
                  process_set=resp.process_set, reduce_op=as_op(resp.reduce_op),
                  prescale=resp.prescale, postscale=resp.postscale, backend=resp.backend,
                  priority=resp.priority)
        e.dtype, e.shape, e.device, e.handle = resp.dtype, shape, resp.device, Handle(name)
        e.meta["numel"] = numel
        return e

    def _change_sets(self, resp, e):
        """Every rank runs this at the same point of its response stream (Split is collective)."""
        if resp.op_type == M.ADD_PROCESS_SET:
            mpi_wait.wait(self.world.Ibarrier())   # line up first: Split below blocks (and spins)
            sid = self.sets.next_id
            self.sets.add(sid, list(e.shape), self.world)
            self._complete(e, sid)
        else:
            self.sets.remove(e.shape[0])
            if self._rounds is not None:
                for left in self._rounds.drop_set(e.shape[0]):
                    self._complete(left, error=f"ringscope: process set {e.shape[0]} was removed "
                                               "while this op was waiting in it")
            self._complete(e, e.shape[0])
        rec = get_recorder()
        if rec.enabled:
            rec.set_run_meta(process_sets=self.sets.as_meta())

    def _complete(self, e, result=None, error=None):
        self._complete_many([(e, result, error)])

    def _complete_many(self, done):
        """Finish ops, ``done`` = [(entry, result, error)]: their lifecycles go to the trace before
        any handle is released (so a finished op's end is always recorded)."""
        self._ops.complete(done)

    def _die(self, exc):
        self.fatal = f"{type(exc).__name__}: {exc}"
        self._ops.refuse(RuntimeError, f"ringscope engine stopped: {self.fatal}")
        print(f"[ringscope] rank {self.rank}: the background engine failed; aborting the job\n"
              + "".join(traceback.format_exception(exc)), file=sys.stderr, flush=True)
        for e in list(self._inflight.values()):
            self._complete(e, error=f"ringscope engine failed: {self.fatal}")
        abort(1)

