"""The recorder API that the runtime calls on its hot path.

CONTRACT (the runtime codes against these calls; the tracer implements them):

    rec = tracer.get_recorder()          # process-wide; a no-op NullRecorder until configured
    rec.enabled                          # bool; callers may skip building args when False
    rec.mark_cycles                      # bool; emit CYCLE spans when True
    t = rec.now()                        # int, time.perf_counter_ns()
    tok = rec.begin(tid, name, cat, args, tensor=None, ts_ns=None)
                                                    # opens an X span (and an NVTX range), now or at
                                                    # ts_ns; tensor=NAME instead of args: {tensor, step}
    rec.end(tok, extra_args=None)                   # closes it (same thread or not)
    with rec.span(tid, name, cat, args): ...        # begin at entry, end at exit
    rec.complete(tid, name, cat, start_ns, end_ns, args)   # an X span measured by the caller (no NVTX)
    rec.instant(tid, name, cat, args, ts_ns=None)
    rec.ready(name, rank, process_set=0, ts_ns=None)   # the coordinator's READY instant (fast path)
    rec.ready_many([(name, rank, process_set)], ts_ns=None)   # ... several that arrived together
    rec.async_begin(id, name, args, ts_ns=None)     # cat "tensor"; NVTX start/end range
    rec.async_end(id, name, args=None, ts_ns=None)
    rec.tensor_begin(name, negotiate, ts_ns, step, info)
                                                    # a tensor's lifecycle slice opens (its
                                                    # negotiation phase too, for NVTX)
                                                    # (info = (op, bytes, dtype, shape, reduce_op,
                                                    # process_set); may come later, from another thread)
    rec.tensor_end(name, negotiate, t_response, t_dequeue, t_done, error=None)
                                                    # ... its end, written at completion (the
                                                    # response and dequeue times feed NVTX; the
                                                    # trace has them on the FUSED_RESPONSE)
    rec.tensors_begin([(name, negotiate, ts_ns, step, info)])   # the same for many, one record
    rec.tensors_end([(name, negotiate, t_response, t_dequeue, t_done, error)])
    others = rec.ops_begin(ops)                     # the same, read from the runtime's op objects
    others = rec.ops_end(ops, t_done, error=None, t_response=None, t_dequeue=None)
                                                    #   (see OPS below; the ops of one response);
                                                    #   both return the ops that another recorder
                                                    #   stamped (None if none); ops_end writes the
                                                    #   begin too of an op ops_begin did not get
    rest = rec.finish_ops(done, t_done, note=None)  # when not None: ops_end for the ops of a
                                                    #   response, done = [(op, result, error)], in
                                                    #   one call, after closing ``note`` (below);
                                                    #   returns the items it left to ops_end (all
                                                    #   when any has an error, else another
                                                    #   recorder's) or None
    note = rec.response_note                        # when enabled: a response's own lines
    note.open(args, t_response, size)               #   it starts now (args: FUSED_RESPONSE's)
    note.mark(i)                                    #   memcpy in begins/ends (0, 1), out (2, 3)
    with note.span(name, nbytes, backend): ...      #   a backend phase
    note.close()                                    #   it ends now (unless finish_ops closed it)
    note.times                                      #   (t_response, t_dequeue) while open
    set_inflight(ops_by_name)                       # module-level: see OPS
    rec.ready_requests(reqs, ts_ns=None)            # READY ticks of requests (name, rank, process_set)
    rec.ready_held([(reqs, ts_ns), ...])            # ... of several arrivals (one call)
    rec.nvtx                                        # bool; when True, also call at each transition:
    rec.tensor_phase(name, ended, started=None)     #   NVTX ranges need the live moment
    rec.counter(name, value, ts_ns=None)
    rec.counters(((name, value), ...), ts_ns=None)   # several at one time (one call)
    rec.queue_counters(depth, nbytes)               # queue depth and bytes in flight now, unless
                                                    #   unchanged since last written (one C call)
    rec.mark_step(step=None) / rec.step             # current training step (-1 before the first)
    rec.set_run_meta(**meta)                        # keys of tracer.vocab.META_KEYS
    rec.set_clock_offset(offset_ns, uncertainty_ns, when)   # when = "init" | "shutdown"
    rec.close()                                     # flush and finish the file

OPS: an op is the runtime's object for one submitted collective, with attributes ``name``,
``op_type``, ``nbytes``, ``dtype``, ``shape``, ``reduce_op`` (an enum or its value), ``process_set``,
``submit_ns`` (``rec.now()`` at submission) and ``stamp``. At submission the runtime sets
``stamp = (rec, rec.step)`` when ``rec.enabled``, else leaves it None (one tuple may serve many ops;
``tracer.op_lines.stamper()`` gives it in one C call). An op's begin and end go to the recorder of
its stamp. An attribute, not an entry of a dict the op holds: the completion reads it on memory
the training step has swept, and every object less it reaches costs there.

Begins are written lazily: the runtime calls ``ops_begin`` only when NVTX needs the live moment
(``rec.nvtx``); otherwise ``ops_end`` writes an op's whole slice at completion, while the op is hot,
and the timeline's writer writes, at every flush and at close, the begins of stamped ops still in
flight: the runtime hands its mapping name -> op of submitted, unfinished ops to
``set_inflight`` (an op leaves it before its ``ops_end``). A hung op's begin thus reaches the file
within a flush period, as before.

Names, tids, cats and arg keys come from :mod:`tracer.vocab`.
"""
from __future__ import annotations

import time

from tracer import vocab
from tracer.op_lines_py import split_stamped  # noqa: F401

_now = time.perf_counter_ns


class Span:
    """``with rec.span(...)`` for a recorder written in Python: its ``begin`` at entry, its ``end``
    at exit (the C build's ``Span`` does the same without Python frames)."""

    __slots__ = ("rec", "begin_args", "tok")

    def __init__(self, rec, begin_args):
        self.rec, self.begin_args, self.tok = rec, begin_args, None

    def __enter__(self):
        self.tok = self.rec.begin(*self.begin_args)
        return self

    def __exit__(self, *exc):
        self.rec.end(self.tok)
        self.tok = None
        return False


class NullRecorder:
    """Records nothing; every call is a cheap no-op. Used when no timeline is configured."""

    enabled = False
    mark_cycles = False
    nvtx = False
    step = -1
    finish_ops = None   # no fast path: the runtime calls ops_end

    @property
    def response_note(self):
        """The note of the running response (made on first use: its lines go through this
        recorder's begin, end, span and counter; the runtime reads it only when enabled)."""
        note = self.__dict__.get("_response_note")
        if note is None:
            from tracer.response_note import ResponseNote
            note = self.__dict__["_response_note"] = ResponseNote(self)
        return note

    def now(self) -> int:
        return _now()

    def begin(self, tid, name, cat, args=None, tensor=None, ts_ns=None):
        return None

    def end(self, token, extra_args=None):
        pass

    def span(self, tid, name, cat, args=None):
        return Span(self, (tid, name, cat, args))

    def complete(self, tid, name, cat, start_ns, end_ns, args=None):
        pass

    def instant(self, tid, name, cat, args=None, ts_ns=None):
        pass

    def async_begin(self, id, name, args=None, ts_ns=None):
        pass

    def async_end(self, id, name, args=None, ts_ns=None):
        pass

    def counter(self, name, value, ts_ns=None):
        pass

    def counters(self, values, ts_ns=None):
        for name, value in values:
            self.counter(name, value, ts_ns)

    def queue_counters(self, depth, nbytes):
        if self.enabled:
            self.counters(((vocab.COUNTER_QUEUE_DEPTH, depth),
                           (vocab.COUNTER_BYTES_IN_FLIGHT, nbytes)))

    def ready(self, name, rank, process_set=0, ts_ns=None):
        pass

    def ready_many(self, ticks, ts_ns=None):
        pass

    def tensor_begin(self, name, negotiate, ts_ns, step, info):
        pass

    def tensor_phase(self, name, ended, started=None):
        pass

    def tensors_begin(self, items):
        pass

    def tensors_end(self, items):
        pass

    def tensor_end(self, name, negotiate, t_response, t_dequeue, t_done, error=None):
        pass

    # The op-level calls in terms of the item-level ones (a recorder may do them faster).
    def _begun(self) -> set:
        b = self.__dict__.get("_begun_ops")
        if b is None:
            b = self.__dict__["_begun_ops"] = set()
        return b

    def _begin_items(self, stamped):
        begun = self._begun()
        new = [(op, st) for op, st in stamped if op.name not in begun]
        if new:
            begun.update(op.name for op, _ in new)
            self.tensors_begin([(op.name, vocab.negotiate_name(op.op_type), op.submit_ns, st[1],
                                 (op.op_type, op.nbytes, op.dtype, tuple(op.shape),
                                  getattr(op.reduce_op, "value", op.reduce_op), op.process_set))
                                for op, st in new])

    def ops_begin(self, ops):
        mine, others = split_stamped(self, ops)
        if mine:
            self._begin_items(mine)
        return others

    def ops_end(self, ops, t_done, error=None, t_response=None, t_dequeue=None):
        mine, others = split_stamped(self, ops)
        if mine:
            self._begin_items(mine)
            self._begun().difference_update(op.name for op, _ in mine)
            self.tensors_end([(op.name, vocab.negotiate_name(op.op_type), t_response, t_dequeue,
                               t_done, error) for op, _ in mine])
        return others

    def ready_requests(self, reqs, ts_ns=None):
        if self.enabled and reqs:
            self.ready_many([(r.name, r.rank, r.process_set) for r in reqs], ts_ns)

    def ready_held(self, held):
        for reqs, ts_ns in held:
            self.ready_requests(reqs, ts_ns)

    def mark_step(self, step=None):
        self.step = self.step + 1 if step is None else int(step)

    def set_run_meta(self, **meta):
        pass

    def set_clock_offset(self, offset_ns, uncertainty_ns, when="init"):
        pass

    def close(self):
        pass


_recorder = NullRecorder()
_inflight = None


def set_inflight(ops_by_name) -> None:
    """The runtime's ops submitted and not finished (a dict name -> op, or None): the timeline's
    writer writes the begins of those still in flight (see OPS)."""
    global _inflight
    _inflight = ops_by_name


def inflight():
    """What :func:`set_inflight` was given (None when nothing)."""
    return _inflight


def get_recorder():
    """The process-wide recorder (a :class:`NullRecorder` until a timeline is configured)."""
    return _recorder


def set_recorder(recorder) -> None:
    """Install the process-wide recorder (the tracer's configure step calls this)."""
    global _recorder
    _recorder = recorder
