"""The real recorder behind :mod:`tracer.recorder`'s contract.

Hot path: each call builds one tuple and appends it to a bounded deque (``deque.append`` is atomic,
so no lock); when the deque is full the event is dropped and counted. Serialisation and file I/O
happen on :class:`tracer.writer.TimelineWriter`'s thread.
"""
from __future__ import annotations

import itertools
import time
from collections import deque
from pathlib import Path

from tracer import vocab
from tracer.clock import wall_ns
from tracer.config import TimelineSettings
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
        self._nv_bytes: dict = {}    # async id -> bytes of its outer slice (NVTX payload)
        self._closed = False
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
        f = TraceFile(self.path, self.meta, pid, self.base_ns, settings.max_bytes, settings.cap_mode,
                      settings.keep_parts)
        self._writer = TimelineWriter(self._q, f, settings.flush_interval_s, self.events_dropped)
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

    # ---- hot path --------------------------------------------------------------------------
    def begin(self, tid, name, cat, args=None):
        if not self.enabled:
            return None
        nv = self._nv
        h = nv.start(name, name, args.get(vocab.ARG_BYTES) if args else None) if nv else None
        return (tid, name, cat, args, _now(), self.step, h)

    def end(self, token, extra_args=None):
        if token is None:
            return
        t1 = _now()
        tid, name, cat, args, t0, step, h = token
        if h is not None:
            self._nv.end(h)
        q = self._q
        if len(q) < self._cap:
            q.append(("X", tid, name, cat, t0, t1, args, step, extra_args))
        else:
            next(self._drops)

    def complete(self, tid, name, cat, start_ns, end_ns, args=None):
        if self.enabled:
            q = self._q
            if len(q) < self._cap:
                q.append(("X", tid, name, cat, start_ns, end_ns, args, self.step, None))
            else:
                next(self._drops)

    def instant(self, tid, name, cat, args=None, ts_ns=None):
        if self.enabled:
            q = self._q
            if len(q) < self._cap:
                q.append(("i", tid, name, cat, _now() if ts_ns is None else ts_ns, None, args,
                          self.step, None))
            else:
                next(self._drops)

    def async_begin(self, id, name, args=None, ts_ns=None):
        if not self.enabled:
            return
        if self._nv is not None:
            self._nv_start(id, name, args)
        q = self._q
        if len(q) < self._cap:
            q.append(("b", id, name, vocab.CAT_TENSOR, _now() if ts_ns is None else ts_ns, None, args,
                      self.step, None))
        else:
            next(self._drops)

    def async_end(self, id, name, args=None, ts_ns=None):
        # Not gated by the window: an end whose begin was recorded must be written; the writer
        # drops ends whose begin is not in the file.
        if self._closed:
            return
        if self._nv is not None:
            self._nv_stop(id, name)
        q = self._q
        if len(q) < self._cap:
            q.append(("e", id, name, vocab.CAT_TENSOR, _now() if ts_ns is None else ts_ns, None, args,
                      self.step, None))
        else:
            next(self._drops)

    def counter(self, name, value, ts_ns=None):
        if self.enabled:
            q = self._q
            if len(q) < self._cap:
                q.append(("C", None, name, vocab.CAT_COUNTER, _now() if ts_ns is None else ts_ns, value,
                          None, -1, None))
            else:
                next(self._drops)

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
            self.complete(vocab.TID_FRAMEWORK, vocab.STEP, vocab.CAT_FRAMEWORK, self._step_t0, t,
                          {vocab.ARG_STEP: prev})
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

    def _finish_window(self):
        # The window is over: finish the file without making training wait for the writer.
        self._closed = True
        self.enabled = False
        self._writer.request_close(self._shutdown_args())

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
        first = not self._closed
        self._closed = True
        self.enabled = False
        if first:
            self._writer.close(self._shutdown_args())
        else:
            self._writer.join(10.0)

    @property
    def emitter(self):
        """The NVTX emitter (None when NVTX is disabled or the ``nvtx`` package is missing)."""
        return self._nv

    @property
    def writer(self) -> TimelineWriter:
        return self._writer
