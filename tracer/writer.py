"""The writer thread: formats the recorder's records and writes them, one batch per flush.

It wakes every ``flush_interval_s`` (at most 1 s), takes the records buffered so far (one swap of
the recorder's buffer) and formats them into one chunk of JSON lines (:class:`tracer._record.
Formatter`, C), followed by the B lines of the runtime's ops still in flight, and hands the chunk
to :class:`tracer.tracefile.TraceFile` in one ``pwritev``. Only this thread makes text or touches
the file, so lines never interleave. Errors on disk never reach the training thread: the writer
reports once on stderr and discards from then on.
"""
from __future__ import annotations

import sys
import threading

from tracer import recorder, vocab
from tracer.tracefile import TraceFile

_SEP = b",\n"


class TimelineWriter:
    """Owns the file; everything it does happens on its own daemon thread."""

    def __init__(self, core, tracefile: TraceFile, flush_interval_s: float):
        self._core = core
        self._lines = tracefile.lines
        self.file = tracefile
        self._interval = min(flush_interval_s, 1.0)
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

    def name_thread(self, tid: int, name: str) -> None:
        """Name thread ``tid`` in the file, before the next flush's events (non-blocking)."""
        self._request("thread", (tid, name), timeout=None)

    def update_meta(self, meta: dict) -> None:
        """Rewrite the file's metadata (non-blocking)."""
        self._request("meta", dict(meta), timeout=None)

    def close(self, shutdown_args=None, timeout: float = 10.0) -> bool:
        """Write the SHUTDOWN instant, finish the file and stop the thread."""
        ok = self._request("close", shutdown_args, timeout)
        self._thread.join(timeout if ok else 0.1)
        return ok

    def request_close(self, shutdown_args=None) -> None:
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
            n = len(self._requests)   # requests appended meanwhile wait for the next round
            reqs = self._requests[:n]
            del self._requests[:n]
            for kind, payload, _ in reqs:
                if kind == "thread":
                    self._guard(self.file.name_thread, *payload)
            self._drain()
            for kind, payload, done in reqs:
                if kind == "meta":
                    self._guard(self.file.update_meta, payload)
                elif kind == "close":
                    self._finish(payload or {})
                    self._closing = True
                done.set()
            if self._closing:
                for _, _, done in self._requests:   # requests that raced with the close
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
        """The records so far, then the B lines of ops in flight (an op finished since the take
        has left the mapping, and its end is in the next take), then the drop counter."""
        parts = [self._lines.take(self._core)]
        src = recorder.inflight()
        if src:
            parts.append(self._lines.begins(self._core, list(src.values())))
        dropped = self._core.events_dropped()
        if dropped != self._last_dropped:
            self._last_dropped = dropped
            parts.append((self._lines.counter(vocab.COUNTER_EVENTS_DROPPED, self.file.now_rel(),
                                              dropped), 1))
        parts = [p for p in parts if p[1]]
        if not parts or self.broken or self.file.closed:
            return
        self._guard(self.file.write, _SEP.join(p[0] for p in parts), sum(p[1] for p in parts))

    def _finish(self, shutdown_args) -> None:
        """``shutdown_args``: a dict, or a callable giving one (called after the last lines)."""
        f = self.file
        if f.closed:
            return
        self._drain()
        args = dict(shutdown_args() if callable(shutdown_args) else shutdown_args)
        args.update(events_written=f.lines_written, events_dropped=self._core.events_dropped(),
                    events_capped=f.discarded, open_async_at_close=len(self._lines.begun))
        self._guard(f.write, f.instant(vocab.SHUTDOWN, args), 1, True)
        f.close()
