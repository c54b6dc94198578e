"""The writer thread: drains the recorder's buffer, serialises events and writes them.

It wakes every ``flush_interval_s`` (at most 1 s), converts the buffered records to Chrome-trace
lines, drops async ends whose begin is not in this file (a window or DYNAMIC start opened in the
middle of an op), and hands the lines to :class:`tracer.tracefile.TraceFile`. Errors on disk never
reach the training thread: the writer reports once on stderr and discards from then on.
"""
from __future__ import annotations

import sys
import threading
from collections import deque

from tracer import format as fmt
from tracer import vocab
from tracer.tracefile import TraceFile

DUMPS_CHUNK = 128   # events serialised per orjson call (~60 us with the GIL held)


class TimelineWriter:
    """Owns the file; everything it does happens on its own daemon thread."""

    def __init__(self, queue: deque, tracefile: TraceFile, flush_interval_s: float, dropped):
        self._q = queue
        self.file = tracefile
        self._interval = min(flush_interval_s, 1.0)
        self._dropped = dropped            # callable: events the hot path dropped so far
        self._last_dropped = 0
        self._open_async: dict = {}        # async id -> [names of open b events, innermost last]
        self.unmatched_ends = 0
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
        n = len(q)
        if n == 0 and self._dropped() == self._last_dropped:
            return
        recs = [q.popleft() for _ in range(n)]
        lines = self._lines(recs)
        dropped = self._dropped()
        if dropped != self._last_dropped:
            self._last_dropped = dropped
            t = recs[-1][4] if recs else self.file.base_ns
            lines.append(fmt.dumps(fmt.to_event(("C", None, vocab.COUNTER_EVENTS_DROPPED, None, t,
                                                 dropped, None, -1, None), self.file.pid,
                                                self.file.base_ns)))
        if self.broken or self.file.closed:
            return
        self._guard(self.file.write, lines)

    def _lines(self, recs: list) -> list[bytes]:
        pid, base = self.file.pid, self.file.base_ns
        open_async = self._open_async
        out = []
        to_event = fmt.to_event
        for rec in recs:
            ph = rec[0]
            if ph == "b":
                open_async.setdefault(rec[1], []).append(rec[2])
            elif ph == "e":
                names = open_async.get(rec[1])
                if not names or rec[2] not in names:
                    self.unmatched_ends += 1
                    continue
                # remove the innermost open slice of that name
                del names[len(names) - 1 - names[::-1].index(rec[2])]
                if not names:
                    del open_async[rec[1]]
            out.append(to_event(rec, pid, base))
        # orjson holds the GIL for a whole call: small chunks let training threads in between
        lines = []
        for i in range(0, len(out), DUMPS_CHUNK):
            lines += fmt.dumps_many(out[i:i + DUMPS_CHUNK])
        return lines

    def _finish(self, shutdown_args: dict) -> None:
        f = self.file
        if f.closed:
            return
        args = dict(shutdown_args)
        args.update(events_written=f.lines_written, events_dropped=self._dropped(),
                    events_capped=f.discarded, unmatched_async_ends=self.unmatched_ends,
                    open_async_at_close=sum(len(v) for v in self._open_async.values()))
        line = f._instant(vocab.SHUTDOWN, args)
        self._guard(lambda: f.write([line], force=True))
        f.close()
