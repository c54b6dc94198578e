"""The real recorder behind :mod:`tracer.recorder`'s contract.

Hot path: a bounded deque of records (``deque.append`` is atomic, so no lock); when it is full the
event is dropped and counted. The dense events (tensor lifecycles, READY ticks) are formatted where
they are recorded, in batches, by :mod:`tracer.op_lines` (C when built), and buffered as strings.
The sparse ones (spans, counters, the framework's waits) are buffered as tuples of their values and
formatted by the writer in a batch (C when built): in the middle of a training step every Python
call on the recording thread runs with cold caches, and a span formatted there cost ~35 µs against
~5 µs for appending its tuple (measured in the demo at 2 ranks). File I/O happens on
:class:`tracer.writer.TimelineWriter`'s thread.
"""
from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from pathlib import Path

from tracer import lines, op_lines, recorder, vocab
from tracer.op_lines_py import split_stamped
from tracer.clock import wall_ns
from tracer.config import TimelineSettings
from tracer.format import dumps
from tracer.response_note import ResponseNote
from tracer.tracefile import TraceFile
from tracer.writer import TimelineWriter

_now = time.perf_counter_ns


def _count_value(counter) -> int:
    # itertools.count: next() is atomic under the GIL; its repr is "count(N)".
    return int(repr(counter)[6:-1])


class TimelineRecorder:
    """Records one rank's events into one trace file (see the contract in tracer/recorder.py)."""

    def __init__(self, meta: dict, settings: TimelineSettings, path: Path, emitter=None,
                 step: int = -1, mark_cycles: bool | None = None):
        self.settings = settings
        self.path = Path(path)
        self.step = step
        self.mark_cycles = settings.mark_cycles if mark_cycles is None else bool(mark_cycles)
        self._window = settings.steps_window
        self._cap = settings.buffer_events
        self._q: deque = deque()
        self._drops = itertools.count()
        self._nv = emitter
        if emitter is not None:
            emitter.mark(f"ringscope rank={meta.get('rank', 0)} size={meta.get('size', 1)}")
        self._nv_async: dict = {}    # (id, name) -> nvtx handle
        self._open: dict = {}        # tensors whose lifecycle begin is in this file
        self._open_lock = threading.Lock()   # the writer's begins of ops in flight vs their ends
        self._open_async: dict = {}  # (id, name) -> generic async slices open in this file
        self.unmatched_ends = 0      # ends dropped because their begin is not in this file
        self._nv_bytes: dict = {}    # async id -> bytes of its outer slice (NVTX payload)
        self._closed = False
        self._queue_written = None   # queue_counters' last values (Python path)
        self._shutdown_offset = (None, None)
        # one base for every event of this rank: a monotonic ns and the wall clock at the same moment
        self.base_ns = _now()
        self.meta = dict(meta)
        self.meta["base_epoch_ns"] = wall_ns()
        self.meta["mark_cycles"] = self.mark_cycles
        self.meta["steps_window"] = list(self._window) if self._window else None
        self._step_t0 = self.base_ns
        self._step_nv = None
        pid = int(self.meta.get("rank", 0))
        self._lb = lines.LineBuilder(pid)
        self._ready_head = self._lb.ready_head
        f = TraceFile(self.path, self.meta, pid, self.base_ns, settings.max_bytes, settings.cap_mode,
                      settings.keep_parts)
        self.nvtx = emitter is not None   # callers skip :meth:`tensor_phase` when False
        # C build without NVTX: spans, counters and lifecycle ends are formatted where they are
        # recorded, into ``Lines``, and the writer takes its bytes whole (NVTX needs the per-op
        # path of ops_end, and the Python methods)
        fast = op_lines.Lines is not None and op_lines.Spans is not None and not self.nvtx
        lb = self._lb
        self._lines = op_lines.Lines(lb._heads, lb._head, lb._names, lb.json_name, dumps,
                                     vocab.CAT_COUNTER, self._q, self._cap, self._drops) \
            if fast else None
        self._writer = TimelineWriter(self._q, f, settings.flush_interval_s, self.events_dropped,
                                      lb, self.inflight_begins, self._lines)
        # the ends of finished ops in one call
        self.finish_ops = None if self.nvtx else op_lines.Completions(
            self, lb._tensors, lb.tensor_text, self._open, self._open_lock,
            self._q if self._lines is None else self._lines, self._cap, self._drops, self.base_ns,
            lb._gen)
        if fast:
            # span and counter calls in C (they read ``enabled`` and ``step`` from here)
            spans = op_lines.Spans(self.__dict__, self._lines, self.base_ns,
                                   vocab.COUNTER_QUEUE_DEPTH, vocab.COUNTER_BYTES_IN_FLIGHT,
                                   (vocab.TID_FRAMEWORK, vocab.STEP, vocab.CAT_FRAMEWORK))
            self.begin, self.end, self.span = spans.begin, spans.end, spans.span
            self.counter, self.counters = spans.counter, spans.counters
            self.queue_counters = spans.queue_counters
            if self._window is None:   # (a window switches recording at steps: Python's job)
                self.mark_step = spans.mark_step
        # a response's own lines: noted as it runs, written by its completion (C), else live
        self.response_note = op_lines.Note(self._lines, (
            vocab.FUSED_RESPONSE, vocab.MEMCPY_IN_FUSION_BUFFER, vocab.MEMCPY_OUT_FUSION_BUFFER,
            vocab.COUNTER_FUSION_FILL, vocab.TID_FUSION, vocab.TID_BACKEND, vocab.CAT_FUSION,
            vocab.CAT_MEMCPY, vocab.CAT_COMM), self.base_ns) \
            if fast and op_lines.Note is not None else ResponseNote(self)
        self.enabled = self._in_window(step)

    # ---- window of steps --------------------------------------------------------------------
    def _in_window(self, step: int) -> bool:
        w = self._window
        if w is None:
            return not self._closed
        return w[0] <= step and (w[1] is None or step < w[1])

    def events_dropped(self) -> int:
        return _count_value(self._drops)

    def now(self) -> int:
        return _now()

    # ---- hot path: format the line(s), append one record ---------------------------------------
    def _put(self, record, events: int = 1) -> bool:
        """Buffer one record (a string of ``events`` lines, or a deferred tuple); False when the
        buffer is full and its events were dropped (and counted)."""
        q = self._q
        if len(q) < self._cap:
            q.append(record)
            return True
        for _ in range(events):
            next(self._drops)
        return False

    def begin(self, tid, name, cat, args=None, tensor=None, ts_ns=None):
        if not self.enabled:
            return None
        nv = self._nv
        h = nv.start(name, name, args.get(vocab.ARG_BYTES) if args else None) if nv else None
        return (tid, name, cat, args, _now() if ts_ns is None else ts_ns, self.step, h, tensor)

    # The calls below append inline rather than through _put: each Python call on a recording
    # thread costs microseconds on cold caches, and these run tens of times a step.
    def end(self, token, extra_args=None):
        if token is None:
            return
        t1 = _now()
        tid, name, cat, args, t0, step, h, tensor = token
        if h is not None:
            self._nv.end(h)
        b = self.base_ns
        q = self._q
        if len(q) >= self._cap:
            next(self._drops)
        elif tensor is not None and args is None and extra_args is None:
            q.append(("S", name, cat, tid, tensor, t0 - b, t1 - b, step))
        else:
            q.append(("X", name, cat, tid, t0 - b, t1 - b, step, args, extra_args))

    def span(self, tid, name, cat, args=None):
        """``with rec.span(...)``: :meth:`begin` at entry, :meth:`end` at exit (bound to the C
        build's, which runs no Python frame, when there is one)."""
        return recorder.Span(self, (tid, name, cat, args))

    def complete(self, tid, name, cat, start_ns, end_ns, args=None):
        if self.enabled:
            b = self.base_ns
            q = self._q
            if len(q) < self._cap:
                q.append(("X", name, cat, tid, start_ns - b, end_ns - b, self.step, args, None))
            else:
                next(self._drops)

    def instant(self, tid, name, cat, args=None, ts_ns=None):
        if self.enabled:
            t = _now() if ts_ns is None else ts_ns
            self._put(self._lb.instant(name, cat, tid, t - self.base_ns,
                                       lines.jargs(args, self.step)))

    def ready(self, name, rank, process_set=0, ts_ns=None):
        """The coordinator's READY tick: ``rank`` submitted ``name`` (an instant on tid 2)."""
        self.ready_many([(name, rank, process_set)], ts_ns)

    def ready_many(self, ticks, ts_ns=None):
        """READY ticks that arrived together, ``ticks`` = [(name, rank, process_set)]: one record."""
        if self.enabled and ticks:
            t = _now() if ts_ns is None else ts_ns
            text = self._lb.ready_many(ticks, t - self.base_ns, self.step)
            self._put(text, text.count("\n") + 1)

    def counter(self, name, value, ts_ns=None):
        if self.enabled:
            t = _now() if ts_ns is None else ts_ns
            q = self._q
            if len(q) < self._cap:
                q.append(("C", name, t - self.base_ns, value))
            else:
                next(self._drops)

    def counters(self, values, ts_ns=None):
        """Several counters at one time, ``values`` = ((name, value), ...)."""
        if self.enabled:
            t = (_now() if ts_ns is None else ts_ns) - self.base_ns
            q, cap = self._q, self._cap
            for name, value in values:
                if len(q) < cap:
                    q.append(("C", name, t, value))
                else:
                    next(self._drops)

    def queue_counters(self, depth, nbytes):
        """Queue depth and bytes in flight as counters now, unless both equal those last written."""
        if self.enabled and (depth, nbytes) != self._queue_written:
            self._queue_written = (depth, nbytes)
            self.counters(((vocab.COUNTER_QUEUE_DEPTH, depth),
                           (vocab.COUNTER_BYTES_IN_FLIGHT, nbytes)))

    # ---- the per-tensor lifecycle -----------------------------------------------------------------
    def tensor_begin(self, name, negotiate, ts_ns, step, info):
        """Submission: the tensor's outer async slice and its negotiation open at ``ts_ns``.
        ``step`` is the step at submission (the call may come later, from the engine's thread);
        ``info`` = (op, bytes, dtype, shape, reduce_op, process_set), the outer slice's args."""
        self.tensors_begin([(name, negotiate, ts_ns, step, info)])

    def tensors_begin(self, items):
        """:meth:`tensor_begin` for many, ``items`` = [(name, negotiate, ts_ns, step, info)]: one
        buffered record."""
        if self._closed or not items:
            return
        if not self._put(self._lb.tensor_begins(items, self.base_ns), len(items)):
            return    # dropped: their ends must not be written either
        opened = self._open
        for item in items:
            opened[item[0]] = 1
        if self._nv is not None:
            for name, negotiate, _, _, info in items:
                self._nv_start(name, name, {vocab.ARG_BYTES: info[1]})
                self._nv_start(name, negotiate, None)

    def tensor_phase(self, name, ended, started=None):
        """NVTX only (call when :attr:`nvtx` is set): phase ``ended`` is over, ``started`` opens.
        The trace gets these transitions from the times passed to :meth:`tensor_end`."""
        if self._nv is None or name not in self._open:
            return
        self._nv_stop(name, ended)
        if started is not None:
            self._nv_start(name, started, None)

    def tensor_end(self, name, negotiate, t_response, t_dequeue, t_done, error=None):
        """Completion: the tensor's slice ends at ``t_done`` (written only when this file holds its
        begin). ``t_response`` (None if no response came) and ``t_dequeue`` end its negotiation
        and QUEUE phases for NVTX; the trace has them on the response (FUSED_RESPONSE)."""
        self.tensors_end([(name, negotiate, t_response, t_dequeue, t_done, error)])

    def tensors_end(self, items):
        """:meth:`tensor_end` for many tensors, ``items`` = [(name, negotiate, t_response,
        t_dequeue, t_done, error)]: one buffered record."""
        if self._closed:
            return
        pop = self._open.pop
        known = [it for it in items if pop(it[0], None) is not None]
        self.unmatched_ends += len(items) - len(known)
        if not known:
            return
        if self._nv is not None:
            for name, negotiate, *_ in known:
                for phase in (negotiate, vocab.QUEUE, name):
                    self._nv_stop(name, phase)
        self._put(self._lb.tensor_ends([(it[0], it[4], it[5]) for it in known], self.base_ns,
                                       self.step), len(known))

    # ---- the same, read from the runtime's ops (tracer.recorder's OPS; formatted in C when built)
    def ops_begin(self, ops):
        """:meth:`tensors_begin` for the ops this recorder stamped (the runtime calls it only for
        NVTX: :meth:`ops_end` and the writer write the begins otherwise); returns the ops another
        recorder stamped (None if none)."""
        full = self._closed or len(self._q) >= self._cap
        lb = self._lb
        with self._open_lock:
            text, n, others = op_lines.begins(self, lb._tensors, lb.tensor_text,
                                              None if full else self._open, ops, self.base_ns)
        if n:
            if full:
                if not self._closed:
                    for _ in range(n):
                        next(self._drops)
            else:
                self._q.append(text)
        if self._nv is not None:
            for op, _ in split_stamped(self, ops)[0]:
                if (op.name, op.name) not in self._nv_async:
                    self._nv_start(op.name, op.name, {vocab.ARG_BYTES: op.nbytes})
                    self._nv_start(op.name, vocab.negotiate_name(op.op_type), None)
        return others

    def ops_end(self, ops, t_done, error=None, t_response=None, t_dequeue=None):
        """The lifecycle ends of the ops this recorder stamped (and their begins, unless written
        already), all done at ``t_done`` with the same ``error``, in a response that arrived at
        ``t_response`` and started at ``t_dequeue``; returns the ops another recorder stamped
        (None if none)."""
        if self._nv is not None:
            for op, _ in split_stamped(self, ops)[0]:
                for phase in (vocab.negotiate_name(op.op_type), vocab.QUEUE, op.name):
                    self._nv_stop(op.name, phase)
        # each lifecycle carries the step its op was submitted in (its stamp's): an op not waited
        # for at once may finish after the next step is marked, and a response may fuse ops of two
        lb = self._lb
        with self._open_lock:
            text, events, others = op_lines.ends(self, lb._tensors, lb.tensor_text, self._open, ops,
                                                 self.base_ns, t_done, lines.error_text(error))
        if events and not self._closed:
            self._put(text, events)
        return others

    def inflight_begins(self) -> str:
        """The begin lines of the ops this recorder stamped that are still in flight and whose
        begin is not written yet (the writer calls this at every flush and at close)."""
        src = recorder.inflight()
        if not src:
            return ""
        ops = list(src.values())
        lb = self._lb
        with self._open_lock:
            # an op that left the mapping is being finished: its ops_end writes its whole slice
            # (begins skips the ops whose begin is written already)
            live = [op for op in ops if src.get(op.name) is op]
            return op_lines.begins(self, lb._tensors, lb.tensor_text, self._open, live,
                                   self.base_ns)[0]

    def ready_held(self, held):
        """READY ticks of requests that arrived together, for each (reqs, ts_ns) of ``held``."""
        if self.enabled and held:
            lb = self._lb
            text, n = op_lines.ready_held(lb._names, lb.json_name, held, self._ready_head,
                                          self.base_ns, self.step)
            if n:
                self._put(text, n)

    def ready_requests(self, reqs, ts_ns=None):
        """READY ticks of requests that arrived together (``name``, ``rank``, ``process_set``)."""
        if self.enabled and reqs:
            t = _now() if ts_ns is None else ts_ns
            lb = self._lb
            text, n = op_lines.ready(lb._names, lb.json_name, reqs, self._ready_head,
                                     t - self.base_ns, self.step)
            self._put(text, n)

    # ---- generic async slices (same file rules: an end needs its begin in this file) ---------------
    def async_begin(self, id, name, args=None, ts_ns=None):
        if not self.enabled:
            return
        if self._nv is not None:
            self._nv_start(id, name, args)
        key = (id, name)
        self._open_async[key] = self._open_async.get(key, 0) + 1
        t = _now() if ts_ns is None else ts_ns
        self._put(self._lb.async_event("b", name, id, t - self.base_ns,
                                       lines.jargs(args, self.step)))

    def async_end(self, id, name, args=None, ts_ns=None):
        # Not gated by the window: an end whose begin was recorded must be written.
        if self._closed:
            return
        key = (id, name)
        n = self._open_async.get(key)
        if not n:
            self.unmatched_ends += 1
            return
        if n == 1:
            del self._open_async[key]
        else:
            self._open_async[key] = n - 1
        if self._nv is not None:
            self._nv_stop(id, name)
        t = _now() if ts_ns is None else ts_ns
        self._put(self._lb.async_event("e", name, id, t - self.base_ns,
                                       lines.jargs(args, self.step)))

    def open_async(self) -> int:
        """Async slices begun in this file and not ended (written at close)."""
        return len(self._open) + sum(self._open_async.values())

    # ---- NVTX for async slices (only when an emitter is present) ------------------------------
    def _nv_start(self, id, name, args):
        if name == id:
            b = args.get(vocab.ARG_BYTES) if args else None
            self._nv_bytes[id] = b
            h = self._nv.start(id, vocab.CAT_TENSOR, b)
        else:
            h = self._nv.start(f"{name} {id}", name, self._nv_bytes.get(id))
        self._nv_async[(id, name)] = h

    def _nv_stop(self, id, name):
        h = self._nv_async.pop((id, name), None)
        if h is not None:
            self._nv.end(h)
        if name == id:
            self._nv_bytes.pop(id, None)

    # ---- steps, metadata, lifecycle -----------------------------------------------------------
    def mark_step(self, step=None):
        """Close the STEP span of the current step and advance (or set) the step."""
        t = _now()
        prev = self.step
        if self._step_nv is not None:
            self._nv.end(self._step_nv)
            self._step_nv = None
        if self.enabled and prev >= 0:
            # no args dict: the span's step (still ``prev`` here) is written as its args
            self.complete(vocab.TID_FRAMEWORK, vocab.STEP, vocab.CAT_FRAMEWORK, self._step_t0, t)
        self.step = prev + 1 if step is None else int(step)
        self._step_t0 = t
        if self._window is not None and not self._closed:
            was = self.enabled
            self.enabled = self._in_window(self.step)
            w_end = self._window[1]
            if was and not self.enabled and w_end is not None and self.step >= w_end:
                self._finish_window()
        if self.enabled and self._nv is not None:
            self._step_nv = self._nv.start(f"STEP {self.step}", vocab.STEP, None)

    def _mark_closed(self):
        self._closed = True
        self.enabled = False
        if self.finish_ops is not None:
            self.finish_ops.closed = True

    def _finish_window(self):
        # The window is over: finish the file without making training wait for the writer.
        self._mark_closed()
        self._writer.request_close(self._shutdown_args)

    def set_run_meta(self, **meta):
        self.meta.update(meta)
        self._writer.update_meta(meta)

    def set_clock_offset(self, offset_ns, uncertainty_ns, when="init"):
        if when == "shutdown":
            self._shutdown_offset = (offset_ns, uncertainty_ns)
        else:
            self.set_run_meta(clock_offset_ns=int(offset_ns),
                              clock_offset_uncertainty_ns=None if uncertainty_ns is None
                              else int(uncertainty_ns))

    def _shutdown_args(self) -> dict:
        off, unc = self._shutdown_offset
        return {"clock_offset_ns": off, "clock_offset_uncertainty_ns": unc,
                "unmatched_async_ends": self.unmatched_ends,
                "open_async_at_close": self.open_async()}

    def flush(self, timeout: float = 5.0) -> bool:
        """Block until everything recorded so far is on disk (tests, signal handlers)."""
        return self._writer.flush(timeout)

    def close(self):
        """Write the SHUTDOWN instant and finish the file (idempotent)."""
        first = not self._closed
        self._mark_closed()
        if first:
            self._writer.close(self._shutdown_args)
        else:
            self._writer.join(10.0)

    @property
    def emitter(self):
        """The NVTX emitter (None when NVTX is disabled or the ``nvtx`` package is missing)."""
        return self._nv

    @property
    def writer(self) -> TimelineWriter:
        return self._writer
