"""Bit-vector rounds: with the response cache on, one bitwise-AND allreduce per cycle orders the work.

Every rank posts a round every cycle (``cycle_time_ms``), busy or not, on its own communicator (a
dup of the world's), and waits for it without blocking. While every rank is idle the rounds slow
down (doubling up to IDLE_CYCLES cycles), so that an idle runtime does not take the CPU from the
compute it overlaps; a rank that gets work posts its next round at once. The words (uint64, ANDed):

    word 0      flags: bit 0 = "I have joined" (all set: every rank joined); bit 1 = "I am idle";
                bit 2 = "I am not shutting down" (clear: from then on every tensor goes to rank 0,
                which fails those that wait on a rank that left)
    word 1      the coordinator's responses this rank knows of, as a thermometer from ``next_id``:
                bit i set when response ``next_id + i`` arrived (or was not addressed to it)
    per set     (every registered set, in id order; a non-member's words are all ones)
                ready: the cached tensors this rank has submitted (a joined rank: all ones)
                valid: all ones but the bits this rank found stale (a changed request)

From a round's result every rank derives the same work, in the same order: the coordinator's
responses that every rank has (by id), then per set in id order the cached tensors every member
submitted, higher priority first, fused as the coordinator fuses. So the two paths never run their
collectives in different orders on different ranks, and rank 0 does no more than any other rank on
the cached path. A stale bit is dropped on every member at the same round; whoever had the tensor
pending under it sends it to the coordinator instead.
"""
from __future__ import annotations

import numpy as np

from collectives import messages as M
from collectives._core import bits_of, put_bits
from collectives.response_cache import ResponseCache
from tracer import vocab as V
from tracer.fusion_rules import IDLE_CYCLES

# collectives._round is imported where it is used: it links libmpi, which mpi4py.MPI loads (and
# importing that starts MPI, which collectives.init does first)

ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
WINDOW = 64                    # coordinator responses ordered per round at most
CACHED_ID_BASE = 1 << 40       # cached responses: CACHED_ID_BASE * (set id + 1) + n


class RoundResult:
    """What one round decided, identical on every rank."""

    __slots__ = ("all_idle", "all_joined", "invalid", "known", "leaving", "ready")

    def __init__(self, known, all_joined, ready, invalid, all_idle=False, leaving=False):
        self.known = known            # coordinator responses with id < known may run
        self.all_joined = all_joined
        self.all_idle = all_idle
        self.leaving = leaving        # some rank has started shutting down
        self.ready = ready            # set id -> [bit] every member submitted (members only)
        self.invalid = invalid        # set id -> [bit] some member found stale


class BitRounds:
    def __init__(self, comm, sets, config):
        self.comm = comm               # this engine's own communicator for the rounds
        self.round = None              # its Iallreduce, posted and tested in C (None: simulated)
        if comm is not None:
            from collectives._round import Round  # (it shares libmpi with mpi4py: MPI runs)
            self.round = Round(comm.py2f())
        self.sets = sets
        self.config = config
        self.capacity = config.cache_capacity
        self.words = (self.capacity + 63) // 64
        self.caches: dict[int, ResponseCache] = {}
        self.pending: dict[int, dict[int, object]] = {}   # set -> bit -> entry submitted here
        self.stale: dict[int, dict[int, list]] = {}       # set -> bit -> entries held for its drop
        self.next_id = 0               # the next coordinator response to run (same on every rank)
        self.known = 0                 # the coordinator's responses this rank knows up to
        self.joined = False
        self.leaving = False           # this rank has submitted its shutdown
        self.bypass = False            # a rank is leaving: the cache is no longer used
        self.cached_ids: dict[int, int] = {}
        self._posted = None            # (layout, joined) of the round in flight
        self._send = self._recv = None
        self._next_post = 0.0
        self._gap = config.cycle_time_ms / 1000.0   # between rounds now (longer while all idle)
        self._eager = False            # the round after the last one goes at once (:meth:`retry`)
        self.rounds = 0

    # ---- per set state -------------------------------------------------------------------------
    def cache(self, set_id: int) -> ResponseCache:
        c = self.caches.get(set_id)
        if c is None:
            c = self.caches[set_id] = ResponseCache(self.capacity)
            self.pending[set_id] = c.pending   # (the table's own: its lookup and plan use them)
            self.stale[set_id] = c.stale
        return c

    def drop_set(self, set_id: int) -> list:
        """The set is gone: its cache goes; returns the entries that were pending under it."""
        self.caches.pop(set_id, None)
        left = list(self.pending.pop(set_id, {}).values())
        for held in self.stale.pop(set_id, {}).values():
            left += held
        return left

    def forget(self, e) -> None:
        """``e`` finished another way (an error): it no longer waits under a bit."""
        pend = self.pending.get(e.process_set)
        if pend:
            for bit, p in list(pend.items()):
                if p is e:
                    del pend[bit]

    def take_all(self) -> list:
        """Every entry waiting under a bit or held for one (they go to rank 0 instead)."""
        out = []
        for sid in self.pending:
            out += self.pending[sid].values()
            self.pending[sid].clear()
            for held in self.stale[sid].values():
                out += held
            self.stale[sid].clear()
        return out

    def busy(self) -> bool:
        return any(self.pending.values()) or any(self.stale.values()) or self.joined

    # ---- the round -----------------------------------------------------------------------------
    def due(self, now: float) -> bool:
        return not self.round.pending and now >= self._next_post

    def post(self, now: float, idle: bool = False) -> None:
        v = self.vector(idle)
        self.round.post(v, self._recv)
        self._next_post = now + self._gap
        self.rounds += 1

    def wake(self, now: float) -> None:
        """This rank has work: its next round goes at once (and the rounds are no longer slow)."""
        self._gap = self.config.cycle_time_ms / 1000.0
        self._next_post = min(self._next_post, now)

    def retry(self, now: float) -> None:
        """After a round: tensors submitted here that some rank still lacks go in the next round at
        once, so that it is in flight when they arrive there (that rank posts as soon as it has
        them: :meth:`wake`) instead of a gap later. Not after a round that went at once itself:
        two ranks each waiting on the other's tensors would otherwise run rounds back to back."""
        self._eager = not self._eager and any(self.pending.values())
        if self._eager:
            self._next_post = min(self._next_post, now)

    def idle_nap_s(self) -> float:
        """How long the engine may sleep between checks while every rank is idle (0: not idle)."""
        cycle = self.config.cycle_time_ms / 1000.0
        return self._gap / 4 if self._gap > cycle else 0.0

    def vector(self, idle: bool = False) -> np.ndarray:
        """This rank's words for the next round (remembered: :meth:`decode` reads its result)."""
        layout = self.sets.ids()
        n = 2 + 2 * self.words * len(layout)
        if self._send is None or self._send.size != n:
            self._send = np.empty(n, dtype=np.uint64)
            self._recv = np.empty(n, dtype=np.uint64)
        v = self._send
        v.fill(ALL)
        v[0] = (1 if self.joined else 0) | (2 if idle and not self.busy() else 0) | \
            (0 if self.leaving else 4)
        ahead = min(WINDOW, self.known - self.next_id)
        v[1] = ALL if ahead >= 64 else np.uint64((1 << ahead) - 1)
        for k, sid in enumerate(layout):
            if sid not in self.caches:
                continue
            ready = 2 + 2 * self.words * k
            if not self.joined:
                v[ready:ready + self.words] = 0
                put_bits(v, ready, self.pending[sid], True)
            if self.stale[sid]:
                put_bits(v, ready + self.words, self.stale[sid], False)
        self._posted = (layout, self.joined)
        return v

    def test(self) -> RoundResult | None:
        """The finished round's result (None while it is in flight or none was posted)."""
        if not self.round.test():
            return None
        return self.decode(self._recv)

    def decode(self, r) -> RoundResult:
        """The decisions in a round's AND-reduced words (the same on every rank)."""
        layout = self._posted[0]
        known = self.next_id + int(r[1]).bit_length()
        ready, invalid = {}, {}
        for k, sid in enumerate(layout):
            if sid not in self.caches:
                continue
            base = 2 + 2 * self.words * k
            invalid[sid] = bits_of(r, base + self.words, self.words, True)
            ready[sid] = bits_of(r, base, self.words, False)
        all_idle = bool(int(r[0]) & 2)
        cycle = self.config.cycle_time_ms / 1000.0
        self._gap = min(self._gap * 2, cycle * IDLE_CYCLES) if all_idle else cycle
        return RoundResult(known, bool(int(r[0]) & 1), ready, invalid, all_idle,
                           not int(r[0]) & 4)

    def responses(self, sid: int, bits, threshold: int, my_rank: int) -> list:
        """The cached responses of set ``sid`` for ``bits`` (ready everywhere and valid), in the
        order every member derives: priority, then bit; fused like the coordinator's (the table's
        plan, in C, with the fusion rule's one implementation). Returns [(response, entries)]; a
        rank that joined has None for the tensors it lacks."""
        out = []
        for cached, names, entries, nbytes, missing in self.caches[sid].plan(bits, threshold):
            c0 = cached[0]
            n = self.cached_ids.get(sid, 0)
            self.cached_ids[sid] = n + 1
            resp = M.Response(CACHED_ID_BASE * (sid + 1) + n, V.ALLREDUCE, names, process_set=sid,
                              dtype=c0.dtype, reduce_op=c0.reduce_op, prescale=c0.prescale,
                              postscale=c0.postscale, backend=c0.backend, device=c0.device,
                              nbytes=nbytes, adapter=c0.adapter, priority=c0.priority)
            if missing:
                if not self._posted_joined():
                    lost = [c.name for c, e in zip(cached, entries) if e is None]
                    raise RuntimeError(f"bit round: cached tensors {lost} ready everywhere "
                                       "but never submitted on this rank")
                resp.joined = [my_rank]   # this rank reduces zeros for the ones it lacks
                resp.shapes = {c.name: c.shape for c in cached}
            out.append((resp, entries))
        return out

    def _posted_joined(self) -> bool:
        return bool(self._posted and self._posted[1])

    def pending_since(self, before_ns: int) -> list:
        """Entries pending under a bit since before ``before_ns`` (submit_ns clock)."""
        return [e for pend in self.pending.values() for e in pend.values()
                if e.submit_ns < before_ns]

    def wait_s(self, now: float) -> float:
        return max(0.0, self._next_post - now)

