"""The fusion planning rules, shared by the runtime's coordinator and response cache
(:mod:`collectives.fusion`, :mod:`collectives.bit_rounds`) and the viewer's what-if replay
(:mod:`viewer.whatif`), so that both plan alike. The plan itself (priority order, then greedy fusion)
is one C function, ``tracer._fusion_rules.plan`` (tracer/_fusion_rules.c), which the engine's native
core calls directly (tracer/fusion_api.h): :func:`by_priority` and :func:`fuse` wrap it.

- Only an allreduce without an error fuses (:func:`fusable`); two units fuse when their keys match.
- Higher priority is planned first; readiness order among equals (:func:`by_priority`).
- Greedy fusion within a byte threshold; 0 disables fusion; a unit that does not fit is skipped
  over and starts a later batch (:func:`fuse`).
- The coordinator sends what is ready once a cycle has passed since the first of it became ready,
  or at once when nothing is partly submitted, fusion is off, or the threshold is reached
  (:func:`flush_due`).
- With the response cache, the bit rounds' gap doubles while every rank is idle, up to IDLE_CYCLES
  cycles.
"""
from __future__ import annotations

from tracer import vocab as V
from tracer.native import load

plan = load("tracer._fusion_rules").plan

IDLE_CYCLES = 8   # the bit rounds' longest gap while every rank is idle, in cycles (runtime and replay)


def fusable(op_type: str, error: object = None) -> bool:
    """Whether an op of this type may share a fused response with others."""
    return error is None and op_type == V.ALLREDUCE


def by_priority(units, priority_of) -> list:
    """Higher priority first; readiness order among equals (a stable sort)."""
    units = list(units)
    return [units[b[0]] for b in plan([priority_of(u) for u in units], None, None, 0)]


def fuse(units, key_of, bytes_of, threshold: int) -> list[list]:
    """Greedy fusion, shared by the coordinator and the response cache: each unit in turn takes
    every later unit with the same key (None: never fused) while the byte total stays within
    ``threshold``; a unit that does not fit is skipped over and starts a later batch."""
    units, ids = list(units), {}
    keys = [-1 if (k := key_of(u)) is None else ids.setdefault(k, len(ids)) for u in units]
    return [[units[i] for i in b] for b in plan(None, keys, [bytes_of(u) for u in units], threshold)]


def flush_due(waited_s: float, cycle_time_s: float, ready_bytes: int, threshold: int,
              partial: bool) -> bool:
    """Whether the coordinator sends its ready tensors now: ``waited_s`` since the first of them
    became ready, ``ready_bytes`` of them, ``partial`` while some tensor is partly submitted."""
    if threshold == 0 or not partial:
        return True
    return waited_s >= cycle_time_s or ready_bytes >= threshold
