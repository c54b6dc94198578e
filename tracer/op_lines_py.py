"""The lines of runtime ops' lifecycles and READY ticks, read straight from the ops (pure Python).

The reference for :mod:`tracer._oplines` (the same functions in C, used when built): both must
give the same text for the same input, which the tests check. An *op* here is the runtime's object
for one submitted collective (the contract in :mod:`tracer.recorder`): ``name``, ``op_type``,
``nbytes``, ``dtype``, ``shape``, ``reduce_op``, ``process_set`` and a ``meta`` dict holding the
recorder's stamp under ``"submitted"`` = (recorder, ts_ns, step). ``cache`` maps a tensor's name to its constant text (the tuple that
:meth:`tracer.lines.LineBuilder.tensor_text` makes; ``make`` makes and caches one).
"""
from __future__ import annotations

SUBMITTED = "submitted"
# slots of a tensor's constant-text tuple
KEY, OUTER_B, OUTER_E, NEG_B, NEG_E, QUEUE_B, QUEUE_E, MID, ARGS, NEGOTIATE = range(10)


def _text(cache, make, op):
    key = (op.op_type, op.nbytes, op.dtype, op.shape, op.reduce_op, op.process_set)
    c = cache.get(op.name)
    if c is None or c[KEY] != key:
        c = make(op.name, key, None)
    return c


def begins(rec, cache, make, opened, ops, base):
    """Begin lines of the ops stamped by ``rec``: (text, how many, [ops stamped by another
    recorder] or None). ``opened`` (a dict) maps their names to their text; None counts them
    without writing."""
    out, n, others = [], 0, None
    for op in ops:
        stamp = op.meta.get(SUBMITTED)
        if stamp is None:
            continue
        if stamp[0] is not rec:
            others = [] if others is None else others
            others.append(op)
            continue
        n += 1
        if opened is None:
            continue
        c = _text(cache, make, op)
        opened[op.name] = c
        t, step = stamp[1] - base, stamp[2]
        out.append(f'{c[OUTER_B]}{t}{c[MID]}{c[ARGS]}"step":{step}}}}},\n'
                   f'{c[NEG_B]}{t}{c[MID]}{{"step":{step}}}}}')
    return ",\n".join(out), n, others


def ends(rec, cache, make, opened, ops, base, t_done, t_resp, t_deq, s, last):
    """End lines of the ops stamped by ``rec`` whose begin ``opened`` holds (popped; it also
    holds the text their ends use, a tuple like ``cache``'s, or anything else to look it up): (text,
    events, unmatched, others). They all finished at ``t_done`` in a response that arrived at
    ``t_resp`` and started at ``t_deq`` (None: unknown, no QUEUE slice). ``s`` is the args of
    each line, ``last`` those of the outer end."""
    out, events, unmatched, others = [], 0, 0, None
    td = t_done - base
    if t_resp is not None:
        tr = t_resp - base
        tq = td if t_deq is None else t_deq - base
    for op in ops:
        stamp = op.meta.get(SUBMITTED)
        if stamp is None:
            continue
        if stamp[0] is not rec:
            others = [] if others is None else others
            others.append(op)
            continue
        c = opened.pop(op.name, None)   # the begin's text: the end lines need no args
        if c is None:
            unmatched += 1
            continue
        if c.__class__ is not tuple:
            c = _text(cache, make, op)
        if t_resp is None:
            out.append(f'{c[NEG_E]}{td}{c[MID]}{s},\n{c[OUTER_E]}{td}{c[MID]}{last}')
            events += 2
            continue
        out.append(f'{c[NEG_E]}{tr}{c[MID]}{s},\n{c[QUEUE_B]}{tr}{c[MID]}{s},\n'
                   f'{c[QUEUE_E]}{tq}{c[MID]}{s},\n{c[OUTER_E]}{td}{c[MID]}{last}')
        events += 4
    return ",\n".join(out), events, unmatched, others


def ready(tails, make_tail, reqs, head, t, step):
    """READY instants at ``t`` for requests (``name``, ``rank``, ``process_set``), one per line;
    ``tails`` caches each name's args opening (``make_tail`` makes one)."""
    out = []
    for r in reqs:
        tail = tails.get(r.name)
        if tail is None:
            tail = make_tail(r.name)
        out.append(f'{head}{t}e-3,"s":"t"{tail}{r.rank},"step":{step},'
                   f'"process_set":{r.process_set}}}}}')
    return ",\n".join(out)
