"""Chrome-trace event lines, formatted directly as text on the recording thread.

The recorder turns the dense events (a batch of tensors' lifecycles, READY ticks) into JSON lines
at once and buffers the ``str``: strings are invisible to the garbage collector (buffered tuples
holding dicts were promoted through its generations and made full collections of the training
process more frequent). The sparse ones (spans, counters, the framework's waits) are records:
the C build formats them at once too (``Lines``, tracer/_lines.c); the pure-Python one leaves them
as tuples for the writer thread, which formats them with :meth:`LineBuilder.deferred`.

Cheap by construction: the constant part of a line (name, cat, ph, pid, tid) is built once per
name and cached, so a line costs a couple of integer formats. Each tensor's lifecycles are on a
thread of their own (:meth:`LineBuilder.tensor_tid`), named by metadata lines the writer takes
from :meth:`LineBuilder.take_threads`. ``ts`` and ``dur`` are
integer nanoseconds from the rank's base written with an exponent, ``123456789e-3``: a JSON number
in µs, exact, and far cheaper to format than a float. Keys come in the order docs/TRACE_FORMAT.md
gives: name, cat, ph, pid, tid, ts, then dur / s / id2, then args.
"""
from __future__ import annotations

import re

from tracer import vocab
from tracer.format import dumps
from tracer.op_lines_py import HE, KEY, b_line, e_line
from tracer.op_lines_py import ready as ready_lines

_TID = re.compile(r'"tid":(\d{4,})')   # a tensor's thread (vocab.TID_TENSOR_BASE and up)
CACHE_MAX = 1 << 16     # names of a job are bounded, but unnamed ops count up: keep caches bounded
TENSOR_ARGS = (vocab.ARG_OP, vocab.ARG_BYTES, vocab.ARG_DTYPE, vocab.ARG_SHAPE, vocab.ARG_REDUCE_OP,
               vocab.ARG_PROCESS_SET)   # a lifecycle's args before its step, in order


class _Tick:
    __slots__ = ("name", "rank", "process_set")

    def __init__(self, name, rank, process_set):
        self.name, self.rank, self.process_set = name, rank, process_set


def jstr(s: str) -> str:
    """``s`` as a JSON string literal (quoted and escaped)."""
    return dumps(str(s)).decode()


def jargs(args: dict | None, step: int, extra: dict | None = None) -> str:
    """The args object: ``args`` plus ``extra``, with the step when the caller did not set one."""
    if not args and not extra:
        return f'{{"step":{step}}}'
    if not extra and vocab.ARG_STEP in args:
        return dumps(args).decode()
    a = dict(args) if args else {}
    if extra:
        a.update(extra)
    if vocab.ARG_STEP not in a:
        a[vocab.ARG_STEP] = step
    return dumps(a).decode()


def error_text(error) -> str:
    """What follows the step in the args of a lifecycle's end: the error, if any."""
    return "" if error is None else f',"{vocab.ARG_ERROR}":{jstr(error)}'


class LineBuilder:
    """Formats the lines of one rank's trace (``pid`` = rank), caching the constant parts."""

    def __init__(self, pid: int):
        self.pid = pid
        self._tensors: dict = {}   # name -> constant text (tensor_text)
        self._gen = [0]            # counts the times _tensors was emptied (C tables follow it)
        self._names: dict = {}     # name -> its JSON string (json_name), for READY lines
        self._heads: dict = {}
        self._tids: dict = {}        # tensor name -> its thread (never cleared: ids stay stable)
        self._named: set = set()     # names whose thread the current file part names
        self._unwritten: list = []   # metadata lines naming threads, for the writer

    # ---- tensors' threads --------------------------------------------------------------------
    def tensor_tid(self, name: str) -> int:
        """The thread of tensor ``name``'s lifecycles (made on first use), named in the file part
        by metadata lines (:meth:`take_threads`) when it is not yet."""
        tid = self._tids.get(name)
        if tid is None:
            tid = self._tids[name] = vocab.TID_TENSOR_BASE + len(self._tids)
        if name not in self._named:
            self._named.add(name)
            self._unwritten.append(self._thread_meta(name, tid))
        return tid

    def _thread_meta(self, name: str, tid: int) -> str:
        return (f'{{"name":"thread_name","ph":"M","pid":{self.pid},"tid":{tid},'
                f'"args":{{"name":{jstr(name)}}}}},\n'
                f'{{"name":"thread_sort_index","ph":"M","pid":{self.pid},"tid":{tid},'
                f'"args":{{"sort_index":{tid}}}}}')

    def take_threads(self) -> list:
        """The metadata lines of the threads named since the last call (each str holds two)."""
        n = len(self._unwritten)   # lines appended meanwhile wait for the next call
        out = self._unwritten[:n]
        del self._unwritten[:n]
        return out

    def new_part(self, carried: str) -> list:
        """A new file part starts with the lines ``carried`` over: the metadata lines naming the
        tensor threads they use. Other threads are named again as they are used (the text cache
        is emptied so that the next line of each tensor passes through :meth:`tensor_text`)."""
        self._named.clear()
        self._forget_texts()
        tids = {int(t) for t in _TID.findall(carried)}
        out = []
        if tids:   # a copy: the recording threads may add names meanwhile
            for name, tid in list(self._tids.items()):
                if tid in tids:
                    self._named.add(name)
                    out.append(self._thread_meta(name, tid))
        return out

    def tensor_head(self, name: str, ph: str) -> str:
        """The start of a ``ph`` line of tensor ``name``'s lifecycle, up to its ``ts`` value."""
        return self._head(ph, self.tensor_tid(name), name, vocab.CAT_TENSOR)

    # ---- constant parts --------------------------------------------------------------------
    def tensor_text(self, name: str, key: tuple) -> tuple:
        """The constant text of one tensor's lifecycle lines, made and cached: a tuple indexed by
        :mod:`tracer.op_lines_py`'s slots (KEY, ARGS, HX, HB, HE). ``key`` = (op, bytes, dtype,
        shape, reduce_op, process_set) gives its slice's args."""
        op, nbytes, dtype, shape, reduce_op, ps = key
        args = dumps(dict(zip(TENSOR_ARGS, (op, nbytes, dtype, tuple(shape),
                                            getattr(reduce_op, "value", reduce_op), ps))))
        c = (key, args.decode()[:-1] + ",", self.tensor_head(name, "X"), self.tensor_head(name, "B"),
             self.tensor_head(name, "E"))
        if len(self._tensors) >= CACHE_MAX:
            self._forget_texts()
        self._tensors[name] = c
        return c

    def _forget_texts(self) -> None:
        self._tensors.clear()
        self._gen[0] += 1

    def json_name(self, name: str) -> str:
        """``name`` as a JSON string (cached)."""
        if len(self._names) >= CACHE_MAX:
            self._names.clear()
        j = self._names[name] = jstr(name)
        return j

    def _head(self, ph: str, tid, name: str, cat: str) -> str:
        key = (ph, tid, name, cat)
        h = self._heads.get(key)
        if h is None:
            if len(self._heads) >= CACHE_MAX:
                self._heads.clear()
            h = self._heads[key] = (f'{{"name":{jstr(name)},"cat":{jstr(cat)},"ph":"{ph}",'
                                    f'"pid":{self.pid},"tid":{int(tid)},"ts":')
        return h

    # ---- events ------------------------------------------------------------------------------
    def deferred(self, rec: tuple) -> str:
        """The line of a record the hot path left as a tuple of values (formatted later, in a
        batch, by the writer): ("S", name, cat, tid, tensor, t0, t1, step) is a :meth:`tensor_span`,
        ("X", name, cat, tid, t0, t1, step, args, extra_args) a :meth:`complete` span and
        ("C", name, t, value) a :meth:`counter`."""
        kind = rec[0]
        if kind == "S":
            return self.tensor_span(*rec[1:])
        if kind == "X":
            _, name, cat, tid, t0, t1, step, args, extra = rec
            return self.complete(name, cat, tid, t0, t1, jargs(args, step, extra))
        if kind == "C":
            return self.counter(rec[1], rec[2], rec[3])
        raise ValueError(f"unknown deferred record {kind!r}")

    def complete(self, name: str, cat: str, tid: int, t0: int, t1: int, args: str) -> str:
        """An X event from ``t0`` to ``t1`` (ns from the base)."""
        return f'{self._head("X", tid, name, cat)}{t0}e-3,"dur":{t1 - t0}e-3,"args":{args}}}'

    def instant(self, name: str, cat: str, tid: int, t: int, args: str, scope: str = "t") -> str:
        """An i event (thread scope unless ``scope`` says "p" or "g")."""
        return f'{self._head("i", tid, name, cat)}{t}e-3,"s":"{scope}","args":{args}}}'

    def counter(self, name: str, t: int, value) -> str:
        """A C event with one series, ``value``."""
        v = value if type(value) is int else dumps(value).decode()
        return f'{self._head("C", 0, name, vocab.CAT_COUNTER)}{t}e-3,"args":{{"value":{v}}}}}'

    def async_event(self, ph: str, name: str, id_: str, t: int, args: str) -> str:
        """A b or e event on a tensor's async track (cat "tensor", framework thread, id2.local)."""
        return (f'{self._head(ph, vocab.TID_FRAMEWORK, name, vocab.CAT_TENSOR)}{t}e-3,'
                f'"id2":{{"local":{jstr(id_)}}},"args":{args}}}')

    @property
    def ready_head(self) -> str:
        """The constant start of every READY line."""
        return self._head("i", vocab.TID_NEGOTIATION, vocab.READY, vocab.CAT_NEGOTIATION)

    def ready_many(self, ticks, t: int, step: int) -> str:
        """READY instants at one time, ``ticks`` = [(name, rank, process_set)]: one line per run of
        consecutive ticks of one rank and process set, listing their tensors."""
        return ready_lines(self._names, self.json_name, [_Tick(*x) for x in ticks],
                           self.ready_head, t, step)[0]

    def ready(self, name: str, rank: int, process_set: int, t: int, step: int) -> str:
        """The coordinator's READY instant: ``rank`` submitted tensor ``name``."""
        return self.ready_many([(name, rank, process_set)], t, step)

    def tensor_span(self, name: str, cat: str, tid: int, tensor: str, t0: int, t1: int,
                    step: int) -> str:
        """An X event about one tensor (e.g. the framework's wait in synchronize): args hold the
        tensor's name and the step."""
        jt = self._names.get(tensor) or self.json_name(tensor)   # the cache the C build reads
        return (f'{self._head("X", tid, name, cat)}{t0}e-3,"dur":{t1 - t0}e-3,'
                f'"args":{{"tensor":{jt},"step":{step}}}}}')

    def tensor_begin(self, name: str, negotiate: str, t: int, info: tuple, step: int) -> str:
        """The tensor's slice opens at submission. ``info`` = (op, bytes, dtype, shape, reduce_op,
        process_set): with the tensor's name and the step, its args (usually the same every step,
        so their JSON is reused). ``negotiate`` names its negotiation (kept in the cache)."""
        return self.tensor_begins([(name, negotiate, t, step, info)], 0)

    def tensor_begins(self, items, base: int) -> str:
        """:meth:`tensor_begin` for many, ``items`` = [(name, negotiate, t, step, info)] with times
        absolute (``base`` is subtracted); one string."""
        get, out = self._tensors.get, []
        for name, negotiate, t, step, info in items:
            c = get(name)
            if c is None or c[KEY] != info:   # the key holds the op, so its negotiation too
                c = self.tensor_text(name, info)
            out.append(b_line(c, t - base, step))
        return ",\n".join(out)

    def tensor_end(self, name: str, t_done: int, step: int, error: str | None) -> str:
        """The tensor's slice closes at completion (args: the step, and the error if any). Its
        negotiation and queue phases are its response's (FUSED_RESPONSE's ``queue_ns``)."""
        return self.tensor_ends([(name, t_done, error)], 0, step)

    def tensor_ends(self, items, base: int, step: int) -> str:
        """:meth:`tensor_end` for many, ``items`` = [(name, t_done, error)] with times absolute
        (``base`` is subtracted); one string."""
        get, out = self._tensors.get, []
        for name, t_done, error in items:
            c = get(name)
            he = c[HE] if c is not None else self.tensor_head(name, "E")
            out.append(e_line(he, t_done - base, step, error_text(error)))
        return ",\n".join(out)
