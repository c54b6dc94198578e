"""Stall inspector: report tensors some ranks submitted and others did not; optionally fail them.

After ``stall_check_s`` the coordinator logs, per missing rank, a few of the tensors it has not
submitted, and emits a STALL instant. After ``stall_shutdown_s`` (when > 0) every tensor still
partially submitted gets an ERROR response, so every rank's pending handles raise instead of hanging.
"""
from __future__ import annotations

import sys

from collectives import messages as M
from tracer import get_recorder
from tracer import vocab as V

MAX_NAMES_PER_RANK = 5
EXEMPT = (M.JOIN_NAME, M.SHUTDOWN_NAME)   # waiting in join()/shutdown() is not a stall


class StallInspector:
    def __init__(self, config):
        self.check_s = config.stall_check_s
        self.shutdown_s = config.stall_shutdown_s
        self.warned: set = set()
        self.sets = None

    def next_check(self, now_s, table) -> float | None:
        firsts = [p.first_s for k, p in table.items() if k[1] not in EXEMPT]
        if not firsts or (self.check_s <= 0 and self.shutdown_s <= 0):
            return None
        oldest = min(firsts)
        limits = [s for s in (self.check_s, self.shutdown_s) if s > 0]
        waits = [oldest + s - now_s for s in limits]
        waits = [w for w in waits if w > 0] or [0.05]
        return min(max(w, 0.001) for w in waits)

    def inspect(self, now_s, table) -> list:
        """Report late tensors; past the shutdown time return [(key, pending, error)] for every
        partly submitted tensor (the coordinator fails them)."""
        table = {k: p for k, p in table.items() if k[1] not in EXEMPT}
        if not table:
            return []
        if self.check_s > 0:
            late = {k: p for k, p in table.items()
                    if now_s - p.first_s >= self.check_s and k not in self.warned}
            if late:
                self._report(late, now_s)
                self.warned.update(late)
        if self.shutdown_s <= 0 or all(now_s - p.first_s < self.shutdown_s
                                       for p in table.values()):
            return []
        return [(key, pend, f"ringscope: stall shutdown: {key[1]!r} waited "
                            f"{now_s - pend.first_s:.1f}s for ranks {self._missing(key, pend)} "
                            f"(RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS={self.shutdown_s:g})")
                for key, pend in table.items()]

    def _missing(self, key, pend):
        ranks = self.sets.get(key[0]).ranks if self.sets is not None else []
        return [r for r in ranks if r not in pend.requests]

    def _report(self, late, now_s):
        by_rank: dict = {}
        for key, pend in late.items():
            for r in self._missing(key, pend):
                by_rank.setdefault(r, []).append(key[1])
        parts = []
        for r, names in sorted(by_rank.items()):
            shown = ", ".join(names[:MAX_NAMES_PER_RANK])
            extra = len(names) - MAX_NAMES_PER_RANK
            more = f" (+{extra} more)" if extra > 0 else ""
            parts.append(f"{r}: [{shown}{more}]")
        print(f"[ringscope] stall: {len(late)} tensor(s) submitted by some ranks but not others for "
              f"over {self.check_s:g}s. Missing ranks: " + "; ".join(parts), file=sys.stderr,
              flush=True)
        rec = get_recorder()
        if rec.enabled:
            rec.instant(V.TID_NEGOTIATION, V.STALL, V.CAT_NEGOTIATION,
                        {"missing": {str(r): n[:MAX_NAMES_PER_RANK] for r, n in by_rank.items()},
                         V.ARG_STEP: rec.step})
