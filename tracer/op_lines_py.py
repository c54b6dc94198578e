"""The lines of runtime ops' lifecycles and READY ticks, read straight from the ops (pure Python).

The reference for :mod:`tracer._oplines` (the same functions in C, used when built): both must
give the same text for the same input, which the tests check. An *op* here is the runtime's object
for one submitted collective (the contract in :mod:`tracer.recorder`): ``name``, ``op_type``,
``nbytes``, ``dtype``, ``shape``, ``reduce_op``, ``process_set``, ``submit_ns`` (when it was
submitted, on the recorder's clock) and ``stamp``, the recorder's (recorder, step) or None.
``cache`` maps a tensor's name to its constant text (the tuple that
:meth:`tracer.lines.LineBuilder.tensor_text` makes; ``make`` makes and caches one).
"""
from __future__ import annotations

# slots of a tensor's constant-text tuple: the key its args were made from, the args of its slice
# (an open object, the step and the closing braces to follow) and the heads of its X, B and E lines
# on the tensor's own thread, up to the "ts" value: an X line reads HX TS e-3,"dur":D e-3,"args":ARGS
KEY, ARGS, HX, HB, HE = range(5)


def split_stamped(rec, ops):
    """(ops stamped by ``rec`` with their stamps, ops stamped by another recorder or None)."""
    mine, others = [], None
    for op in ops:
        stamp = op.stamp
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
        c = make(op.name, key)
    return c


def b_line(c, t, step):
    """The B line of a tensor (constant text ``c``) submitted at ``t`` (relative) in ``step``."""
    return f'{c[HB]}{t}e-3,"args":{c[ARGS]}"step":{step}}}}}'


def e_line(he, t, step, extra=""):
    """The E line (head ``he``) at ``t``: the step and ``extra`` (e.g. the error) as its args."""
    return f'{he}{t}e-3,"args":{{"step":{step}{extra}}}}}'


def _begin(op, c, stamp, base):
    return b_line(c, op.submit_ns - base, stamp[1])


def _whole(op, c, stamp, base, td, extra):
    ts = op.submit_ns - base
    return f'{c[HX]}{ts}e-3,"dur":{td - ts}e-3,"args":{c[ARGS]}"step":{stamp[1]}{extra}}}}}'


def begins(rec, cache, make, opened, ops, base):
    """B lines of the ops stamped by ``rec`` whose B ``opened`` does not hold yet (one each: the
    tensor's slice opens at its submission, with its args, on the tensor's thread): (text, how
    many, [ops stamped by another recorder] or None). ``opened`` (a dict) maps their names to their
    text; None counts them all without writing."""
    mine, others = split_stamped(rec, ops)
    if opened is None:
        return "", len(mine), others
    out = []
    for op, stamp in mine:
        if op.name in opened:
            continue
        c = opened[op.name] = _text(cache, make, op)
        out.append(_begin(op, c, stamp, base))
    return ",\n".join(out), len(out), others


def ends(rec, cache, make, opened, ops, base, t_done, extra):
    """The lifecycles of the ops stamped by ``rec``, all finished at ``t_done``: one X line each,
    or an E line when ``opened`` holds the op (its B is written; popped, it holds the text, a tuple
    like ``cache``'s, or anything else to look it up): (text, events, others). ``extra`` follows
    the step in their args (e.g. ``,"error":...``)."""
    out = []
    td = t_done - base
    mine, others = split_stamped(rec, ops)
    for op, stamp in mine:
        c = opened.pop(op.name, None)
        if c is None:
            out.append(_whole(op, _text(cache, make, op), stamp, base, td, extra))
            continue
        if c.__class__ is not tuple:
            c = _text(cache, make, op)
        out.append(e_line(c[HE], td, stamp[1], extra))
    return ",\n".join(out), len(out), others


class Stamper:
    """The runtime's stamp of a submitted op: ``stamper()`` gives (recorder, step) for ops
    submitted now, or None when the current recorder (``state["_recorder"]``, tracer.recorder's
    globals) is not enabled; the same tuple while neither changes, so a step allocates once.
    ``last`` is the last stamp given, or None; :meth:`settle` forgets it once its recorder is no
    longer the current one."""

    def __init__(self, state):
        self.state, self.last = state, None

    def __call__(self):
        rec = self.state["_recorder"]
        if not rec.enabled:
            return None
        last, step = self.last, rec.step
        if last is None or last[0] is not rec or last[1] != step:
            last = self.last = (rec, step)
        return last

    def settle(self):
        last = self.last
        if last is not None and last[0] is not self.state["_recorder"]:
            self.last = None


class Completions:
    """A recorder's lifecycle ends as one callable (the C build's is one call per response, where
    two Python frames cost more than the formatting): ``completions(done, t_done, note=None)``,
    ``done`` = [(op, result, error)], closes the response's ``note`` first, then writes the lifecycles of the ops ``rec`` stamped as :func:`ends` does,
    each end carrying its own op's step, and appends them to ``q`` as one record (or counts them on
    ``drops`` when ``q`` holds ``cap`` records), under ``lock`` (the writer's begins of ops in
    flight take it too); nothing is buffered once ``closed`` is set. It returns what it did not
    write, for the general path: every item when any has an error, else the items stamped by
    another recorder (None when none). ``gen``, the line builder's count of emptied caches, is
    what the C build's own table of texts follows; the dict alone serves here."""

    def __init__(self, rec, cache, make, opened, lock, q, cap, drops, base, gen=None):
        self.rec, self.cache, self.make, self.opened = rec, cache, make, opened
        self.lock, self.q, self.cap, self.drops, self.base = lock, q, cap, drops, base
        self.closed = False

    def __call__(self, done, t_done, note=None):
        if note is not None and not self.closed:
            note.close()
        if any(item[2] is not None for item in done):
            return list(done)
        out, rest = [], None
        td = t_done - self.base
        with self.lock:
            for item in done:
                op = item[0]
                stamp = op.stamp
                if stamp is None:
                    continue
                if stamp[0] is not self.rec:
                    rest = [] if rest is None else rest
                    rest.append(item)
                    continue
                c = self.opened.pop(op.name, None)
                if c is None:
                    out.append(_whole(op, _text(self.cache, self.make, op), stamp, self.base, td, ""))
                    continue
                if c.__class__ is not tuple:
                    c = _text(self.cache, self.make, op)
                out.append(e_line(c[HE], td, stamp[1]))
        if out and not self.closed:
            if len(self.q) < self.cap:
                self.q.append(",\n".join(out))
            else:
                for _ in out:
                    next(self.drops)
        return rest


def ready_held(names, make_name, held, head, base, step):
    """:func:`ready` for each (reqs, t) of ``held``, ``t`` absolute (``t - base`` is written):
    (text, lines)."""
    out, n = [], 0
    for reqs, t in held:
        text, k = ready(names, make_name, reqs, head, t - base, step)
        if k:
            out.append(text)
            n += k
    return ",\n".join(out), n


def ready(names, make_name, reqs, head, t, step):
    """READY instants at ``t`` for requests (``name``, ``rank``, ``process_set``): one line per run
    of consecutive requests from the same rank and process set, listing their tensors (a message
    from one rank is one run): (text, lines). ``names`` caches each tensor's JSON name
    (``make_name`` makes one)."""
    out, key, jn = [], None, []
    for r in reqs:
        k = (r.rank, r.process_set)
        if k != key:
            if jn:
                out.append(_ready_line(head, t, key, step, jn))
            key, jn = k, []
        j = names.get(r.name)
        jn.append(make_name(r.name) if j is None else j)
    if jn:
        out.append(_ready_line(head, t, key, step, jn))
    return ",\n".join(out), len(out)


def _ready_line(head, t, key, step, jn):
    return (f'{head}{t}e-3,"s":"t","args":{{"rank":{key[0]},"step":{step},'
            f'"process_set":{key[1]},"tensors":[{",".join(jn)}]}}}}')


def chunk(records, heads, make, names, make_name, dumps, fallback, counter_cat):
    """A flush's records as one chunk of bytes, event lines joined by ",\\n", and how many lines:
    strings as they are (a string may hold several lines), tuples formatted by ``fallback``
    (:meth:`tracer.lines.LineBuilder.deferred`). The C build formats the common tuples itself
    (reading ``heads``/``names``, the line builder's caches, and calling ``make``/``make_name`` on a
    miss, ``dumps`` for span args) and must give the same result. Events never hold a raw newline
    (JSON escapes it), so a line is a newline plus one."""
    text = ",\n".join(r if r.__class__ is str else fallback(r) for r in records)
    return text.encode(), (text.count("\n") + 1 if records else 0)
