"""The fusion planning rules, shared by the runtime's coordinator and response cache
(:mod:`collectives.fusion`, :mod:`collectives.bit_rounds`) and the viewer's what-if replay
(:mod:`viewer.whatif`), so that both plan alike. Pure Python, no imports beyond the vocabulary.

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

IDLE_CYCLES = 8   # the bit rounds' longest gap while every rank is idle, in cycles (runtime and replay)


def fusable(op_type: str, error: object = None) -> bool:
    """Whether an op of this type may share a fused response with others."""
    return error is None and op_type == V.ALLREDUCE


def by_priority(units, priority_of) -> list:
    """Higher priority first; readiness order among equals (a stable sort)."""
    if all(priority_of(u) == 0 for u in units):
        return list(units)
    return sorted(units, key=lambda u: -priority_of(u))


def fuse(units, key_of, bytes_of, threshold: int) -> list[list]:
    """Greedy fusion, shared by the coordinator and the response cache: each unit in turn takes
    every later unit with the same key (None: never fused) while the byte total stays within
    ``threshold``; a unit that does not fit is skipped over and starts a later batch."""
    left = [(key_of(u), bytes_of(u), u) for u in units]   # (each unit's key and size, once)
    out = []
    while left:
        key, total, first = left[0]
        batch, rest = [first], []
        if key is not None and threshold > 0:
            for item in left[1:]:
                if item[0] == key and total + item[1] <= threshold:
                    batch.append(item[2])
                    total += item[1]
                else:
                    rest.append(item)
        else:
            rest = left[1:]
        out.append(batch)
        left = rest
    return out


def flush_due(waited_s: float, cycle_time_s: float, ready_bytes: int, threshold: int,
              partial: bool) -> bool:
    """Whether the coordinator sends its ready tensors now: ``waited_s`` since the first of them
    became ready, ``ready_bytes`` of them, ``partial`` while some tensor is partly submitted."""
    if threshold == 0 or not partial:
        return True
    return waited_s >= cycle_time_s or ready_bytes >= threshold
