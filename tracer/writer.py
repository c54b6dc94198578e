"""The writer thread: drains the recorder's buffer of event lines and writes them.

It wakes every ``flush_interval_s`` (at most 1 s), takes the lines the C build formatted where
they were recorded (``formatted``, a :class:`tracer._oplines.Lines`: its bytes as they are), turns
the buffered records (lines the recorder formatted, and spans, counters and waits left as tuples)
into one chunk of bytes (:func:`tracer.op_lines.chunk`, C when built) and hands both to
:class:`tracer.tracefile.TraceFile` in one ``pwritev``, with the begins of the runtime's ops still
in flight after them (``pending``: an op's slice is otherwise written whole when it completes).
Errors on disk never reach the training thread: the writer reports once on stderr and discards
from then on.
"""
from __future__ import annotations

import sys
import threading
from collections import deque
from itertools import repeat, starmap

from tracer import op_lines, vocab
from tracer.format import dumps
from tracer.tracefile import TraceFile


class TimelineWriter:
    """Owns the file; everything it does happens on its own daemon thread."""

    def __init__(self, queue: deque, tracefile: TraceFile, flush_interval_s: float, dropped,
                 lines=None, pending=None, formatted=None):
        self._q = queue
        self._formatted = formatted
        lb = lines or tracefile.lines
        self._deferred = lb.deferred   # formats records left as tuples
        self._threads = lb.take_threads   # metadata lines naming tensors' threads, new since
        tracefile.on_new_part = lb.new_part
        self._chunk_args = (lb._heads, lb._head, lb._names, lb.json_name, dumps, lb.deferred,
                            vocab.CAT_COUNTER)
        self.file = tracefile
        self._interval = min(flush_interval_s, 1.0)
        self._dropped = dropped            # callable: events the hot path dropped so far
        self._pending = pending            # callable: lines of ops still in flight (begins), or ""
        self._last_dropped = 0
        self.broken: str | None = None
        self._requests: list = []          # (kind, payload, done Event)
        self._wake = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="ringscope-timeline-writer", daemon=True)
        self._thread.start()

    # ---- requests from other threads ------------------------------------------------------
    def _request(self, kind, payload=None, timeout: float | None = 5.0) -> bool:
        done = threading.Event()
        self._requests.append((kind, payload, done))
        self._wake.set()
        if timeout is None or not self._thread.is_alive():
            return False
        return done.wait(timeout)

    def wake(self) -> None:
        """Write what is buffered now, without waiting for it (benchmarks place the work)."""
        self._wake.set()

    def flush(self, timeout: float = 5.0) -> bool:
        """Write everything buffered so far; True when it is on disk."""
        return self._request("flush", None, timeout)

    def update_meta(self, meta: dict) -> None:
        """Rewrite the file's metadata (non-blocking)."""
        self._request("meta", dict(meta), timeout=None)

    def close(self, shutdown_args: dict | None = None, timeout: float = 10.0) -> bool:
        """Write the SHUTDOWN instant, finish the file and stop the thread."""
        ok = self._request("close", shutdown_args, timeout)
        self._thread.join(timeout if ok else 0.1)
        return ok

    def request_close(self, shutdown_args: dict | None = None) -> None:
        """Like :meth:`close`, without waiting (safe to call from the training thread)."""
        self._request("close", shutdown_args, timeout=None)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # ---- the thread ---------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            reqs, self._requests[:] = list(self._requests), []
            self._drain()
            for kind, payload, done in reqs:
                if kind == "meta":
                    self._guard(self.file.update_meta, payload)
                elif kind == "close":
                    self._finish(payload or {})
                    self._closing = True
                done.set()
            if self._closing:
                # Requests that raced with the close still get answered.
                for _, _, done in self._requests:
                    done.set()
                return

    def _guard(self, fn, *a) -> None:
        if self.broken:
            return
        try:
            fn(*a)
        except OSError as e:
            self.broken = f"{self.file.current}: {e.strerror or e}"
            print(f"ringscope: timeline writing stopped, {self.broken}", file=sys.stderr)

    def _drain(self) -> None:
        q = self._q
        pre = self._formatted.take() if self._formatted is not None else (b"", 0)
        n = len(q)
        # n pops in C (each one atomic; records appended meanwhile wait for the next flush)
        out = list(starmap(q.popleft, repeat((), n)))
        threads = self._threads()   # after the records: those name every thread they use
        if threads:
            out[:0] = threads
        # after the records: an op finished since has its end queued for the next flush
        begins = self._pending() if self._pending is not None else ""
        if begins:
            out.append(begins)
        dropped = self._dropped()
        if not out and not pre[1] and dropped == self._last_dropped:
            return
        if dropped != self._last_dropped:
            self._last_dropped = dropped
            f = self.file
            out.append(f.lines.counter(vocab.COUNTER_EVENTS_DROPPED, f.now_rel(), dropped))
        if self.broken or self.file.closed:
            return
        self._guard(self._write, out, pre)

    def _write(self, records, pre) -> None:
        # One chunk of bytes, formatted in C when built (no per-line strings to join and encode),
        # after the lines formatted already (``pre``); a size cap needs the lines one by one.
        chunk, n = op_lines.chunk(records, *self._chunk_args)
        if not self.file.write_chunk([pre[0], chunk], n + pre[1]):
            deferred = self._deferred
            first = pre[0].decode().split(",\n") if pre[1] else []   # no event holds a raw newline
            self.file.write(first + [x if x.__class__ is str else deferred(x) for x in records])

    def _finish(self, shutdown_args) -> None:
        """``shutdown_args``: a dict, or a callable giving one (called after the last begins)."""
        f = self.file
        if f.closed:
            return
        self._drain()
        args = dict(shutdown_args() if callable(shutdown_args) else shutdown_args)
        args.update(events_written=f.lines_written, events_dropped=self._dropped(),
                    events_capped=f.discarded)
        line = f._instant(vocab.SHUTDOWN, args)
        self._guard(lambda: f.write([line], force=True))
        f.close()
