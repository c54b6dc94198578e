"""The real recorder behind :mod:`tracer.recorder`'s contract.

The recording calls are :class:`tracer._record.Core`'s, in C: each appends one fixed-size record to
a preallocated buffer under the GIL (a full buffer drops the event and counts it). The writer
thread (:mod:`tracer.writer`) formats a whole flush in one batch. This class adds what happens
once a step or once a run: steps and their window, metadata, the tids of other OS threads, the
system counters' thread (:mod:`tracer.counters`), flush and close.
:class:`NvtxRecorder` is the same with NVTX ranges from ``span``/``begin``/``end``.
"""
from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

from tracer import recorder, vocab
from tracer._record import IDLE, Core, Formatter
from tracer.clock import wall_ns
from tracer.config import TimelineSettings
from tracer.counters import CounterThread
from tracer.format import dumps
from tracer.tracefile import TraceFile
from tracer.writer import TimelineWriter

_now = time.perf_counter_ns
VOCAB = (vocab.CAT_TENSOR, vocab.CAT_COUNTER, vocab.READY, vocab.CAT_NEGOTIATION,
         vocab.TID_NEGOTIATION, vocab.TID_TENSOR_BASE)   # what the C formatter writes itself


class TimelineRecorder(Core):
    """Records one rank's events into one trace file (the contract is in tracer/recorder.py)."""

    def __init__(self, meta: dict, settings: TimelineSettings, path: Path, emitter=None,
                 step: int = -1, mark_cycles: bool | None = None):
        super().__init__(settings.buffer_events)
        self.settings = settings
        self.path = Path(path)
        self.step = step
        self.mark_cycles = settings.mark_cycles if mark_cycles is None else bool(mark_cycles)
        self._window = settings.steps_window
        self._nv = emitter
        if emitter is not None:
            emitter.mark(f"ringscope rank={meta.get('rank', 0)} size={meta.get('size', 1)}")
        self._step_nv = None
        self._shutdown_offset = (None, None)
        self.meta = dict(meta)
        self.meta["base_epoch_ns"] = wall_ns() - (_now() - self.base_ns)
        self.meta["mark_cycles"] = self.mark_cycles
        self.meta["steps_window"] = list(self._window) if self._window else None
        self.meta["counters_hz"] = settings.counters_hz
        self._step_t0 = self.base_ns
        pid = int(self.meta.get("rank", 0))
        f = TraceFile(self.path, self.meta, pid, self.base_ns, Formatter(pid, dumps, VOCAB),
                      settings.max_bytes, settings.cap_mode, settings.keep_parts)
        self._writer = TimelineWriter(self, f, settings.flush_interval_s)
        self.enabled = self._in_window(step)
        self._threads = threading.local()    # .tid: the calling thread's (see thread_tid)
        self._user_k = itertools.count()
        self._counters = CounterThread(self, settings.counters_hz, int(meta.get("local_rank") or 0)) \
            if settings.counters_hz > 0 else None

    def _in_window(self, step: int) -> bool:
        w = self._window
        if w is None:
            return not self.closed
        return w[0] <= step and (w[1] is None or step < w[1])

    def thread_tid(self) -> int:
        """TID_FRAMEWORK on the framework thread, else TID_USER_BASE + k for the k-th other thread
        (named after it in the trace; threads past the 500th share the last tid)."""
        tid = getattr(self._threads, "tid", None)
        if tid is None:
            tid = self._threads.tid = self._new_thread_tid()
        return tid

    def _new_thread_tid(self) -> int:
        if threading.get_ident() == recorder.framework_thread():
            return vocab.TID_FRAMEWORK
        last = vocab.TID_TENSOR_BASE - vocab.TID_USER_BASE - 1
        k = next(self._user_k)
        if k <= last:
            self._writer.name_thread(vocab.TID_USER_BASE + k, threading.current_thread().name
                                     if k < last else "other threads")
        return vocab.TID_USER_BASE + min(k, last)

    # ---- steps, metadata, lifecycle -----------------------------------------------------------
    def mark_step(self, step=None):
        """Close the STEP span of the current step and advance (or set) the step."""
        t = _now()
        prev = self.step
        if self._step_nv is not None:
            self._nv.end(self._step_nv)
            self._step_nv = None
        if self.enabled and prev >= 0:   # args: the step that ended (still ``prev`` here)
            self.complete(vocab.TID_FRAMEWORK, vocab.STEP, vocab.CAT_FRAMEWORK, self._step_t0, t)
        self.step = prev + 1 if step is None else int(step)
        self._step_t0 = t
        if self._window is not None and not self.closed:
            was = self.enabled
            self.enabled = self._in_window(self.step)
            w_end = self._window[1]
            if was and not self.enabled and w_end is not None and self.step >= w_end:
                # the window is over: finish the file without making training wait for it
                self._stop()
                self._writer.request_close(self._shutdown_args)
        if self.enabled and self._nv is not None:
            self._step_nv = self._nv.start(f"STEP {self.step}", vocab.STEP, None)

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
        return {"clock_offset_ns": off, "clock_offset_uncertainty_ns": unc}

    def flush(self, timeout: float = 5.0) -> bool:
        """Block until everything recorded so far is on disk (tests, signal handlers)."""
        return self._writer.flush(timeout)

    def close(self):
        """Write the SHUTDOWN instant and finish the file (idempotent)."""
        first = not self.closed
        if self._counters is not None:
            self._counters.stop()
        self._stop()
        if first:
            self._writer.close(self._shutdown_args)
        else:
            self._writer.join(10.0)

    @property
    def emitter(self):
        """The NVTX emitter (None when NVTX is off or no tool is attached)."""
        return self._nv

    @property
    def writer(self) -> TimelineWriter:
        return self._writer


def _payload(args):
    return args.get(vocab.ARG_BYTES) if args.__class__ is dict else None


class NvtxRecorder(TimelineRecorder):
    """A timeline recorder whose spans are NVTX ranges too (start/end ranges: a span may end on
    another thread), message and category the span's name, payload its ``bytes`` arg."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.py_spans = True   # the C API (record_api.h) then goes through begin/end, with NVTX

    def begin(self, tid, name, cat, args=None, ts_ns=None):
        tok = Core.begin(self, tid, name, cat, args, ts_ns)
        return None if tok is None else (tok, self._nv.start(name, name, _payload(args)))

    def end(self, token, args=None):
        if token is not None:
            tok, h = token
            self._nv.end(h)
            Core.end(self, tok, args)

    def span(self, tid, name, cat, args=None):
        return _NvtxSpan(self, (tid, name, cat, args)) if self.enabled else IDLE


class _NvtxSpan:
    __slots__ = ("rec", "what", "tok")

    def __init__(self, rec, what):
        self.rec, self.what, self.tok = rec, what, None

    def __enter__(self):
        self.tok = self.rec.begin(*self.what)
        return self

    def __exit__(self, *exc):
        self.rec.end(self.tok)
        return False


def open_recorder(meta: dict, settings: TimelineSettings, path: Path, emitter=None,
                  step: int = -1, mark_cycles: bool | None = None) -> TimelineRecorder:
    """The recorder for one trace file: with NVTX ranges when ``emitter`` is given."""
    cls = TimelineRecorder if emitter is None else NvtxRecorder
    return cls(meta, settings, path, emitter, step, mark_cycles)
