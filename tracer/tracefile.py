"""One rank's trace file on disk: valid JSON after every write, with a size cap and rotation.

Layout (see docs/TRACE_FORMAT.md)::

    {"otherData": {"ringscope": {...}},<spaces: head room so the metadata can be rewritten in place>
    "traceEvents": [
    {event},
    {event}
    ]}

New events are written over the closing tail and the tail is written again after them (one
``pwritev`` per flush, from the writer thread only), so the file is complete JSON after every
flush. A process killed mid-write leaves complete lines followed by at most one partial line.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

from tracer import format as fmt
from tracer import vocab
from tracer.config import part_path

CAP_RESERVE = 4096   # bytes kept free under the cap for the CAP_REACHED and SHUTDOWN events
_SEP = b",\n"        # between event lines (JSON escapes a newline inside a value)
_TID = re.compile(rb'"tid":(\d{4,})')   # a tensor's thread (vocab.TID_TENSOR_BASE and up)


class TraceFile:
    """Appends chunks of event lines to one file (or to rotating parts of it). ``lines`` is the
    writer's :class:`tracer._record.Formatter` (it names tensor threads again in a new part)."""

    def __init__(self, path: Path, meta: dict, pid: int, base_ns: int, lines,
                 max_bytes: int | None = None, cap_mode: str = "stop", keep_parts: int = 3):
        self.path = Path(path)
        self.meta = dict(meta)
        self.pid = pid
        self.lines = lines
        self.base_ns = base_ns
        self.max_bytes = max_bytes
        self.cap_mode = cap_mode
        self.keep_parts = keep_parts
        self.part = 0
        self.capped = False          # stop mode: the cap was hit, later events are discarded
        self.discarded = 0           # events not written because of the cap
        self.lines_written = 0
        self.threads: dict[int, str] = {}   # other OS threads' tids (vocab.TID_USER_BASE + k) -> name
        self._fd = None
        self._open(self.path)

    # ---- file plumbing -------------------------------------------------------------------
    def _open(self, path: Path) -> None:
        self.current = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        meta = dict(self.meta, part=self.part)
        self._head_width = fmt.head_width(meta)
        first = [fmt.dumps(e) for e in fmt.metadata_events(self.pid, meta, self.threads)]
        body = fmt.head_line(meta, self._head_width) + fmt.HEAD_SUFFIX + _SEP.join(first)
        os.pwrite(self._fd, body + fmt.TAIL, 0)
        self.pos = len(body)
        self.size = self.pos + len(fmt.TAIL)

    def _pwrite(self, chunk: bytes, lines: int) -> None:
        os.pwritev(self._fd, [_SEP, chunk, fmt.TAIL], self.pos)
        self.pos += len(_SEP) + len(chunk)
        self.size = self.pos + len(fmt.TAIL)
        self.lines_written += lines

    def update_meta(self, meta: dict) -> bool:
        """Rewrite the metadata line in place; False if it no longer fits the head room."""
        self.meta.update(meta)
        if self._fd is None:
            return False
        try:
            line = fmt.head_line(dict(self.meta, part=self.part), self._head_width)
        except ValueError:
            return False
        os.pwrite(self._fd, line, 0)
        return True

    def name_thread(self, tid: int, name: str) -> None:
        """Write the metadata lines naming thread ``tid`` (and name it again in later parts)."""
        self.threads[tid] = name
        lines = fmt.thread_events(self.pid, tid, name)
        self.write(_SEP.join(map(fmt.dumps, lines)), len(lines))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def closed(self) -> bool:
        return self._fd is None

    # ---- writing with the cap --------------------------------------------------------------
    def now_rel(self) -> int:
        """Now, in ns from the rank's base."""
        return time.perf_counter_ns() - self.base_ns

    def instant(self, name: str, args: dict) -> bytes:
        """A process-scoped meta instant (SHUTDOWN, CAP_REACHED) now."""
        return self.lines.instant(name, vocab.CAT_META, vocab.TID_FRAMEWORK, self.now_rel(), args,
                                  "p")

    def write(self, chunk: bytes, lines: int, force: bool = False) -> None:
        """Append ``lines`` event lines joined by ",\\n"; honour the cap unless ``force``."""
        if self._fd is None or not lines:
            return
        if force or self.max_bytes is None:
            self._pwrite(chunk, lines)
            return
        if self.capped:
            self.discarded += lines
            return
        if len(chunk) + len(_SEP) <= self._budget():
            self._pwrite(chunk, lines)
            return
        rest = chunk.split(_SEP)
        n = self._fitting(rest, None)
        while True:
            if n:
                self._pwrite(_SEP.join(rest[:n]), n)
                rest = rest[n:]
            if not rest:
                return
            if self.cap_mode != "rotate":
                self._pwrite(self.instant(vocab.CAP_REACHED, {
                    "bytes": self.size, "max_bytes": self.max_bytes, "mode": "stop"}), 1)
                self.capped = True
                self.discarded += len(rest)
                return
            self._rotate()
            # the new part names the tensor threads its lines use (others are named as they come)
            self.lines.named.clear()
            self.lines.texts.clear()
            names: list = []
            n = max(1, self._fitting(rest, names))   # a line larger than a part goes in alone
            text, k = self.lines.threads(names)
            if k:
                self._pwrite(text, k)

    def _budget(self) -> int:
        return self.max_bytes - CAP_RESERVE - self.size

    def _fitting(self, rest: list, names: list) -> int:
        """How many of ``rest`` fit under the cap, with the lines naming the threads they use
        (when ``names`` is given: a new part; the names are appended to it)."""
        budget, n = self._budget(), 0
        tids = {tid: name for name, tid in list(self.lines.tids.items())} if names is not None \
            else {}
        named = set()
        for line in rest:
            cost = len(line) + len(_SEP)
            new = [tids[t] for t in map(int, _TID.findall(line)) if t in tids and t not in named]
            cost += sum(2 * len(m) + 160 for m in new)   # two metadata lines each
            if cost > budget:
                break
            budget -= cost
            if names is not None:
                named.update(self.lines.tids[m] for m in new)
                names += new
            n += 1
        return n

    def _rotate(self) -> None:
        nxt = part_path(self.path, self.part + 1)
        self._pwrite(self.instant(vocab.CAP_REACHED, {
            "bytes": self.size, "max_bytes": self.max_bytes, "mode": "rotate",
            "next_file": nxt.name}), 1)
        self.close()
        self.part += 1
        self._open(nxt)
        stale = self.part - self.keep_parts
        if stale >= 0:
            try:
                os.unlink(part_path(self.path, stale))
            except OSError:
                pass
