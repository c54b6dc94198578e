"""Rank 0's negotiation state: who asked for what, what is ready, and the ordered responses.

Every process set is coordinated here; a response goes only to the members of its set. Response
ids are assigned in one sequence, so one collective carries the same id on every rank.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from collectives import messages as M
from collectives.fusion import plan_responses
from collectives.stall import EXEMPT, StallInspector
from collectives.validation import mismatch
from tracer import get_recorder
from tracer import vocab as V


@dataclass
class Pending:
    requests: dict = field(default_factory=dict)   # rank -> Request
    first_s: float = 0.0                            # monotonic time of the first request


@dataclass
class Ready:
    key: tuple                 # (set_id, name)
    requests: dict
    error: str | None = None
    joined: tuple = ()         # members that joined and contribute zeros
    last: int = -1             # the rank whose request completed it


class Coordinator:
    def __init__(self, config, sets):
        self.config = config
        self.sets = sets
        self.table: dict[tuple, Pending] = {}
        self.ready: list[Ready] = []
        self.groups: dict[tuple, list[Ready]] = {}   # (set_id, group) -> members ready so far
        self.first_ready_s = None
        self.next_id = 0
        self.leaving: set = set()      # ranks that asked to shut down: they will submit nothing more
        self.joined: set = set()       # ranks waiting in join(): their allreduces reduce zeros
        self.stall = StallInspector(config)
        self.stall.sets = sets

    # ---- intake ------------------------------------------------------------------------------
    def add(self, req: M.Request, now_s: float) -> None:
        key = (req.process_set, req.name)
        pend = self.table.get(key)
        if pend is None:
            pend = self.table[key] = Pending(first_s=now_s)
        pend.requests[req.rank] = req
        if req.op_type == M.SHUTDOWN:
            self.leaving.add(req.rank)
        elif req.op_type == V.JOIN:
            self.joined.add(req.rank)
        rec = get_recorder()
        if rec.enabled:
            rec.instant(V.TID_NEGOTIATION, V.READY, V.CAT_NEGOTIATION,
                        {V.ARG_TENSOR: req.name, V.ARG_RANK: req.rank, V.ARG_STEP: rec.step,
                         V.ARG_PROCESS_SET: req.process_set})
        self._check_ready(key, pend, req.rank, now_s)
        if req.op_type == V.JOIN and len(self.joined) < len(self.sets.get(0).ranks):
            for k, p in list(self.table.items()):   # joined ranks may complete waiting tensors
                self._check_ready(k, p, req.rank, now_s)

    def _check_ready(self, key, pend, last, now_s) -> None:
        members = self.sets.get(key[0]).ranks
        joined = () if key[1] == M.JOIN_NAME else tuple(
            m for m in members if m not in pend.requests and m in self.joined)
        if len(pend.requests) + len(joined) < len(members):
            return
        del self.table[key]
        self.stall.warned.discard(key)
        error = mismatch(pend.requests)
        first = next(iter(pend.requests.values()))
        if error is None and joined and first.op_type != V.ALLREDUCE:
            error = (f"ringscope: {first.op_type.lower()} {key[1]!r} cannot run while ranks "
                     f"{list(joined)} have joined; only allreduce can (they contribute zeros)")
        if first.op_type == V.JOIN:
            self.joined.clear()
        self._became_ready(Ready(key, pend.requests, error, joined, last), now_s)

    def _became_ready(self, item: Ready, now_s: float) -> None:
        first = next(iter(item.requests.values()))
        if first.group and item.error is None:
            gkey = (item.key[0], first.group)
            members = self.groups.setdefault(gkey, [])
            members.append(item)
            if len(members) < first.group_size:
                return
            del self.groups[gkey]
            self.ready.extend(members)
        else:
            self.ready.append(item)
        if self.first_ready_s is None:
            self.first_ready_s = now_s

    # ---- planning ----------------------------------------------------------------------------
    def has_partial(self) -> bool:
        """True while some tensor is partly submitted (ranks waiting in join/shutdown don't count)."""
        return bool(self.groups) or any(k[1] not in EXEMPT for k in self.table)

    def busy(self) -> bool:
        """True while anything is waiting here (the engine then polls instead of idling)."""
        return bool(self.table) or bool(self.groups) or bool(self.ready)

    def ready_bytes(self) -> int:
        return sum(next(iter(r.requests.values())).nbytes for r in self.ready)

    def should_flush(self, now_s: float) -> bool:
        if not self.ready:
            return False
        thr = self.config.fusion_threshold
        if thr == 0 or not self.has_partial() or any(r.error for r in self.ready):
            return True
        if now_s - self.first_ready_s >= self.config.cycle_time_ms / 1000.0:
            return True
        return self.ready_bytes() >= thr

    def wake_in(self, now_s: float) -> float | None:
        """Seconds until the coordinator needs to run again without new input (None: no deadline)."""
        waits = []
        if self.ready:
            waits.append(max(0.0, self.first_ready_s + self.config.cycle_time_ms / 1000.0 - now_s))
        nxt = self.stall.next_check(now_s, self.table)
        if nxt is not None:
            waits.append(nxt)
        return min(waits) if waits else None

    def plan(self, now_s: float) -> list[tuple[M.Response, list[int]]]:
        """Responses to send now, each with the global ranks that execute it."""
        out = []
        if self.should_flush(now_s):
            items, self.ready, self.first_ready_s = self.ready, [], None
            for resp in plan_responses(items, self.config.fusion_threshold, self._new_id):
                out.append((resp, self.sets.get(resp.process_set).ranks))
        for resp in self.stall.inspect(now_s, self.table, self.groups, self._new_id):
            out.append((resp, resp.targets or self.sets.get(resp.process_set).ranks))
        if self.leaving:
            out.extend(self._orphans())
        return out

    def _orphans(self):
        """ERROR responses for tensors waiting on a rank that has started shutting down."""
        out = []
        for key, pend in list(self.table.items()):
            if key[1] == SHUTDOWN_NAME:
                continue
            gone = sorted(r for r in self.sets.get(key[0]).ranks
                          if r in self.leaving and r not in pend.requests)
            if gone:
                del self.table[key]
                msg = (f"ringscope: {key[1]!r} can never complete: rank{'s' if len(gone) > 1 else ''}"
                       f" {', '.join(map(str, gone))} shut down without submitting it")
                asked = sorted(pend.requests)
                out.append((M.Response(self._new_id(), M.ERROR, [key[1]], process_set=key[0],
                                       error=msg, targets=asked), asked))
                group = next(iter(pend.requests.values())).group
                ready = self.groups.pop((key[0], group), []) if group else []
                if ready:   # the group's members that were ready can never run either
                    out.append((M.Response(self._new_id(), M.ERROR, [i.key[1] for i in ready],
                                           process_set=key[0], error=msg),
                                self.sets.get(key[0]).ranks))
        return out

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def shutdown_errors(self):
        """ERROR responses for everything still partial (the job is shutting down)."""
        waiting = [(key, [key[1]]) for key in self.table if key[1] != SHUTDOWN_NAME]
        waiting += [(gkey, [i.key[1] for i in items]) for gkey, items in self.groups.items()]
        out = []
        for (set_id, _), names in waiting:
            resp = M.Response(self._new_id(), M.ERROR, names, process_set=set_id,
                              error=f"ringscope: {names[0]!r} was still waiting for other ranks "
                                    "when the job shut down")
            out.append((resp, self.sets.get(set_id).ranks))
        self.table.clear()
        self.groups.clear()
        self.leaving.clear()
        return out


SHUTDOWN_NAME = M.SHUTDOWN_NAME


def now_s() -> float:
    return time.monotonic()
