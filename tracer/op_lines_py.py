"""The lines of runtime ops' lifecycles and READY ticks, read straight from the ops (pure Python).

The reference for :mod:`tracer._oplines` (the same functions in C, used when built): both must
give the same text for the same input, which the tests check. An *op* here is the runtime's object
for one submitted collective (the contract in :mod:`tracer.recorder`): ``name``, ``op_type``,
``nbytes``, ``dtype``, ``shape``, ``reduce_op``, ``process_set``, ``submit_ns`` (when it was
submitted, on the recorder's clock) and a ``meta`` dict holding the recorder's stamp under
``"submitted"`` = (recorder, step). ``cache`` maps a tensor's name to its constant text (the tuple that
:meth:`tracer.lines.LineBuilder.tensor_text` makes; ``make`` makes and caches one).
"""
from __future__ import annotations

SUBMITTED = "submitted"
# slots of a tensor's constant-text tuple: the key its args were made from, its name and its
# negotiation's name as JSON strings, the args of its outer slice (an open object) and the
# negotiation's name. What all tensors share is in ``heads`` = (head of a "b" line after the name,
# the same for "e", the QUEUE name as JSON): each line reads {"name":NAME HEAD TS e-3,"id2":
# {"local":JNAME},"args":ARGS}.
KEY, JNAME, ARGS, JNEG, NEGOTIATE = range(5)


def split_stamped(rec, ops):
    """(ops stamped by ``rec`` with their stamps, ops stamped by another recorder or None)."""
    mine, others = [], None
    for op in ops:
        stamp = op.meta.get(SUBMITTED)
        if stamp is None:
            continue
        if stamp[0] is rec:
            mine.append((op, stamp))
        else:
            others = [] if others is None else others
            others.append(op)
    return mine, others


def _text(cache, make, op):
    key = (op.op_type, op.nbytes, op.dtype, op.shape, op.reduce_op, op.process_set)
    c = cache.get(op.name)
    if c is None or c[KEY] != key:
        c = make(op.name, key, None)
    return c


def line(jev, head, t, jn):
    """The start of one lifecycle line, up to its args."""
    return f'{{"name":{jev}{head}{t}e-3,"id2":{{"local":{jn}}},"args":'


def begins(rec, cache, make, heads, opened, ops, base):
    """Begin lines of the ops stamped by ``rec``: (text, how many, [ops stamped by another
    recorder] or None). ``opened`` (a dict) maps their names to their text; None counts them
    without writing."""
    mine, others = split_stamped(rec, ops)
    if opened is None:
        return "", len(mine), others
    out, hb = [], heads[0]
    for op, stamp in mine:
        c = _text(cache, make, op)
        opened[op.name] = c
        t, step, jn = op.submit_ns - base, stamp[1], c[JNAME]
        out.append(f'{line(jn, hb, t, jn)}{c[ARGS]}"step":{step}}}}},\n'
                   f'{line(c[JNEG], hb, t, jn)}{{"step":{step}}}}}')
    return ",\n".join(out), len(mine), others


def ends(rec, cache, make, heads, opened, ops, base, t_done, t_resp, t_deq, s, last):
    """End lines of the ops stamped by ``rec`` whose begin ``opened`` holds (popped; it also
    holds the text their ends use, a tuple like ``cache``'s, or anything else to look it up): (text,
    events, unmatched, others). They all finished at ``t_done`` in a response that arrived at
    ``t_resp`` and started at ``t_deq`` (None: unknown, no QUEUE slice). ``s`` is the args of
    each line, ``last`` those of the outer end."""
    out, events, unmatched = [], 0, 0
    hb, he, jq = heads
    td = t_done - base
    if t_resp is not None:
        tr = t_resp - base
        tq = td if t_deq is None else t_deq - base
    mine, others = split_stamped(rec, ops)
    for op, _ in mine:
        c = opened.pop(op.name, None)   # the begin's text: the end lines need no args
        if c is None:
            unmatched += 1
            continue
        if c.__class__ is not tuple:
            c = _text(cache, make, op)
        jn = c[JNAME]
        if t_resp is None:
            out.append(f'{line(c[JNEG], he, td, jn)}{s},\n{line(jn, he, td, jn)}{last}')
            events += 2
            continue
        out.append(f'{line(c[JNEG], he, tr, jn)}{s},\n{line(jq, hb, tr, jn)}{s},\n'
                   f'{line(jq, he, tq, jn)}{s},\n{line(jn, he, td, jn)}{last}')
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
