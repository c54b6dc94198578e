"""Rank 0's negotiation state: who asked for what, what is ready, and the ordered responses.

Every process set is coordinated here; a response goes only to the members of its set. Response
ids are assigned in one sequence, so one collective carries the same id on every rank. Tensors in
the response cache are negotiated without rank 0 (bit_rounds.py); ranks report those pending for
long here only so that the stall inspector can name the ranks that have not submitted them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from collectives import messages as M
from collectives.fusion import plan_responses
from collectives.stall import EXEMPT, StallInspector
from collectives.validation import mismatch
from tracer import vocab as V
from tracer.fusion_rules import flush_due


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
        self.group_seen: dict[tuple, int] = {}
        self.failed_groups: dict[tuple, str] = {}
        self.first_ready_s = None
        self.next_id = 0
        self.leaving: set = set()      # ranks that asked to shut down: they will submit nothing more
        self.joined: set = set()       # ranks waiting in join(): their allreduces reduce zeros
        self.reports: dict[tuple, Pending] = {}   # cached tensors pending long on some ranks
        self.stall = StallInspector(config)
        self.stall.sets = sets

    # ---- intake ------------------------------------------------------------------------------
    def add(self, req: M.Request, now_s: float) -> None:
        key = (req.process_set, req.name)
        if req.report:
            self._report(key, req, now_s)
            return
        pend = self.table.get(key)
        if pend is None:
            pend = self.table[key] = Pending(first_s=now_s)
        pend.requests[req.rank] = req
        if req.op_type == M.SHUTDOWN:
            self.leaving.add(req.rank)
        elif req.op_type == V.JOIN:
            self.joined.add(req.rank)
        self._check_ready(key, pend, req.rank, now_s)
        if req.op_type == V.JOIN and len(self.joined) < len(self.sets.get(0).ranks):
            for k, p in list(self.table.items()):   # joined ranks may complete waiting tensors
                self._check_ready(k, p, req.rank, now_s)

    def _report(self, key, req, now_s) -> None:
        pend = self.reports.get(key)
        if req.report == M.STALL_REPORT:
            first_s = now_s - req.waited_s   # the stall clock runs from the submission
            if pend is None:
                pend = self.reports[key] = Pending(first_s=first_s)
            pend.first_s = min(pend.first_s, first_s)
            pend.requests[req.rank] = req
        elif pend is not None:
            pend.requests.pop(req.rank, None)
            if not pend.requests:
                del self.reports[key]
                self.stall.warned.discard(key)

    def _watched(self) -> dict:
        """What the stall inspector watches: partly submitted tensors, cached ones reported."""
        return {**self.table, **self.reports} if self.reports else self.table

    def _check_ready(self, key, pend, last, now_s) -> None:
        members = self.sets.get(key[0]).ranks
        # (a scan of the members only while some rank has joined: else O(ranks) per request)
        # a rank in join() does not stand in for a shutdown or a join: the others must see it
        joined = () if key[1] in (M.JOIN_NAME, SHUTDOWN_NAME) or not self.joined else tuple(
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
        if not first.group:
            self.ready.append(item)
        else:
            self._group_member_ready(item, first)
        if self.first_ready_s is None:
            self.first_ready_s = now_s

    def _group_member_ready(self, item: Ready, first) -> None:
        """Hold a group's members until all are ready; one bad member fails the whole group
        (otherwise the others would wait forever)."""
        gkey = (item.key[0], first.group)
        seen = self.group_seen[gkey] = self.group_seen.get(gkey, 0) + 1
        held = self.groups.setdefault(gkey, [])
        held.append(item)
        if item.error and gkey not in self.failed_groups:
            self.failed_groups[gkey] = item.error
        failed = self.failed_groups.get(gkey)
        if failed or seen == first.group_size:
            for m in held:
                if failed and m.error is None:
                    m.error = f"{failed} (it failed the group {first.group!r})"
            self.ready.extend(held)
            held.clear()
        if seen == first.group_size:
            for d in (self.groups, self.group_seen, self.failed_groups):
                d.pop(gkey, None)

    # ---- planning ----------------------------------------------------------------------------
    def has_partial(self) -> bool:
        """True while some tensor is partly submitted (ranks waiting in join/shutdown don't count)."""
        return any(self.groups.values()) or any(k[1] not in EXEMPT for k in self.table)

    def busy(self) -> bool:
        """True while anything is waiting here (the engine then polls instead of idling)."""
        return bool(self.table) or any(self.groups.values()) or bool(self.ready)

    def ready_bytes(self) -> int:
        return sum(next(iter(r.requests.values())).nbytes for r in self.ready)

    def should_flush(self, now_s: float) -> bool:
        if not self.ready:
            return False
        if any(r.error for r in self.ready):
            return True
        return flush_due(now_s - self.first_ready_s, self.config.cycle_time_ms / 1000.0,
                         self.ready_bytes(), self.config.fusion_threshold, self.has_partial())

    def wake_in(self, now_s: float) -> float | None:
        """Seconds until the coordinator needs to run again without new input (None: no deadline)."""
        waits = []
        if self.ready:
            waits.append(max(0.0, self.first_ready_s + self.config.cycle_time_ms / 1000.0 - now_s))
        nxt = self.stall.next_check(now_s, self._watched())
        if nxt is not None:
            waits.append(nxt)
        return min(waits) if waits else None

    def plan(self, now_s: float) -> list[tuple[M.Response, list[int]]]:
        """Responses to send now, each with the global ranks that execute it."""
        if not (self.ready or self.table or self.reports or self.leaving):
            return []   # (the engine asks every cycle; with the response cache mostly for nothing)
        out = []
        if self.should_flush(now_s):
            items, self.ready, self.first_ready_s = self.ready, [], None
            for resp in plan_responses(items, self.config.fusion_threshold, self._new_id):
                out.append((resp, self.sets.get(resp.process_set).ranks))
        for key, pend, msg in self.stall.inspect(now_s, self._watched()):
            if key in self.reports:   # a cached tensor: the ranks that have it get the error
                del self.reports[key]
                asked = sorted(pend.requests)
                out.append((M.Response(self._new_id(), M.ERROR, [key[1]], process_set=key[0],
                                       error=msg, targets=asked), asked))
            else:
                self._fail(key, pend, msg, out)
        if self.leaving:
            self._orphans(out)
        return out

    def _fail(self, key, pend, msg, out) -> None:
        """Drop a partly submitted tensor: the ranks that asked get ``msg`` as their error."""
        del self.table[key]
        self.stall.warned.discard(key)
        asked = sorted(pend.requests)
        out.append((M.Response(self._new_id(), M.ERROR, [key[1]], process_set=key[0],
                               error=msg, targets=asked), asked))
        first = next(iter(pend.requests.values()))
        if not first.group:
            return
        gkey = (key[0], first.group)
        self.failed_groups.setdefault(gkey, msg)
        held = self.groups.get(gkey) or []
        if held:   # members already ready can never run either
            out.append((M.Response(self._new_id(), M.ERROR, [i.key[1] for i in held],
                                   process_set=key[0], error=msg), self.sets.get(key[0]).ranks))
            held.clear()
        seen = self.group_seen[gkey] = self.group_seen.get(gkey, 0) + 1
        if seen >= first.group_size:
            for d in (self.groups, self.group_seen, self.failed_groups):
                d.pop(gkey, None)

    def _orphans(self, out) -> None:
        """Fail tensors waiting on a rank that has started shutting down (it will never submit)."""
        for key, pend in list(self.table.items()):
            if key[1] == SHUTDOWN_NAME:
                continue
            gone = sorted(r for r in self.sets.get(key[0]).ranks
                          if r in self.leaving and r not in pend.requests)
            if gone:
                self._fail(key, pend, f"ringscope: {key[1]!r} can never complete: "
                                      f"rank{'s' if len(gone) > 1 else ''} "
                                      f"{', '.join(map(str, gone))} shut down without submitting it",
                           out)

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def shutdown_errors(self):
        """ERROR responses for everything still partial (the job is shutting down)."""
        waiting = [(key, [key[1]]) for key in self.table if key[1] != SHUTDOWN_NAME]
        waiting += [(gkey, [i.key[1] for i in items]) for gkey, items in self.groups.items()
                    if items]
        out = []
        for (set_id, _), names in waiting:
            resp = M.Response(self._new_id(), M.ERROR, names, process_set=set_id,
                              error=f"ringscope: {names[0]!r} was still waiting for other ranks "
                                    "when the job shut down")
            out.append((resp, self.sets.get(set_id).ranks))
        for d in (self.table, self.groups, self.group_seen, self.failed_groups, self.leaving,
                  self.reports):
            d.clear()
        return out


SHUTDOWN_NAME = M.SHUTDOWN_NAME

