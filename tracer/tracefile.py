"""One rank's trace file on disk: valid JSON after every write, with a size cap and rotation.

Layout (see docs/TRACE_FORMAT.md)::

    {"otherData": {"ringscope": {...}},<spaces: head room so the metadata can be rewritten in place>
    "traceEvents": [
    {event},
    {event}
    ]}

New events are written over the closing tail and the tail is written again after them (one
``pwrite`` per flush), so the file is complete JSON after every flush. A process killed mid-write
leaves complete lines followed by at most one partial line, which :mod:`tracer.readback` drops.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from tracer import format as fmt
from tracer import vocab
from tracer.config import part_path
from tracer.lines import LineBuilder

CAP_RESERVE = 4096   # bytes kept free under the cap for the CAP_REACHED and SHUTDOWN events
_SEP = b",\n"   # between event lines


class TraceFile:
    """Appends serialised event lines to one file (or to rotating parts of it)."""

    def __init__(self, path: Path, meta: dict, pid: int, base_ns: int, max_bytes: int | None = None,
                 cap_mode: str = "stop", keep_parts: int = 3):
        self.path = Path(path)
        self.meta = dict(meta)
        self.pid = pid
        self.lines = LineBuilder(pid)
        self.base_ns = base_ns
        self.max_bytes = max_bytes
        self.cap_mode = cap_mode
        self.keep_parts = keep_parts
        self.part = 0
        self.capped = False          # stop mode: the cap was hit, later events are discarded
        self.discarded = 0           # events not written because of the cap
        self.lines_written = 0
        self.on_new_part = None      # carried lines -> lines to write first (LineBuilder.new_part)
        self._fd = None
        self._open(self.path)

    # ---- file plumbing -------------------------------------------------------------------
    def _open(self, path: Path) -> None:
        self.current = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        meta = dict(self.meta, part=self.part)
        self._head_width = fmt.head_width(meta)
        first = [fmt.dumps(e) for e in fmt.metadata_events(self.pid, meta)]   # bytes
        body = fmt.head_line(meta, self._head_width) + fmt.HEAD_SUFFIX + b",\n".join(first)
        os.pwrite(self._fd, body + fmt.TAIL, 0)
        self.pos = len(body)
        self.size = self.pos + len(fmt.TAIL)

    def _pwrite_lines(self, lines: list[str]) -> None:
        # a record may hold several event lines: count them (JSON escapes any newline in a value)
        text = ",\n".join(lines)
        self._pwrite_parts([text.encode()], text.count("\n") + 1)

    def _pwrite_parts(self, parts: list, lines: int) -> None:
        """Append each of ``parts`` (bytes of event lines joined by ",\\n", ``lines`` in all)
        after a ",\\n", then the closing tail: one system call, no copy joining them."""
        iov = []
        for p in parts:
            iov += (_SEP, p)
        iov.append(fmt.TAIL)
        os.pwritev(self._fd, iov, self.pos)
        self.pos += sum(map(len, iov)) - len(fmt.TAIL)
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

    def _instant(self, name: str, args: dict) -> str:
        return self.lines.instant(name, vocab.CAT_META, vocab.TID_FRAMEWORK, self.now_rel(),
                                  fmt.dumps(args).decode(), scope="p")

    def write_chunk(self, parts: list, lines: int) -> bool:
        """Append ``lines`` event lines, given as chunks of bytes that each hold lines already
        joined by ",\\n" (no separator before the first; empty ones are skipped); False, and
        nothing written, when a size cap is set (the caller then gives them to :meth:`write`)."""
        if self.max_bytes is not None:
            return False
        parts = [p for p in parts if p]
        if self._fd is not None and parts:
            self._pwrite_parts(parts, lines)
        return True

    def write(self, lines: list[str], force: bool = False) -> None:
        """Append ``lines``; honour the cap unless ``force`` (used for the SHUTDOWN event)."""
        if self._fd is None or not lines:
            return
        if force or self.max_bytes is None:
            self._pwrite_lines(lines)
            return
        if self.capped:
            self.discarded += _events_in(lines)
            return
        budget = self.max_bytes - CAP_RESERVE - self.size
        n, used = 0, 0
        for line in lines:
            used += len(line.encode()) + 2
            if used > budget:
                break
            n += 1
        if n:
            self._pwrite_lines(lines[:n])
        if n == len(lines):
            return
        rest = lines[n:]
        if self.cap_mode == "rotate":
            nxt = part_path(self.path, self.part + 1)
            self._pwrite_lines([self._instant(vocab.CAP_REACHED, {
                "bytes": self.size, "max_bytes": self.max_bytes, "mode": "rotate",
                "next_file": nxt.name})])
            self.close()
            self.part += 1
            self._open(nxt)
            stale = self.part - self.keep_parts
            if stale >= 0:
                try:
                    os.unlink(part_path(self.path, stale))
                except OSError:
                    pass
            if self.on_new_part is not None:   # name the tensor threads the part starts with
                rest = self.on_new_part("\n".join(rest)) + rest
            self.write(rest)
        else:
            self._pwrite_lines([self._instant(vocab.CAP_REACHED, {
                "bytes": self.size, "max_bytes": self.max_bytes, "mode": "stop"})])
            self.capped = True
            self.discarded += _events_in(rest)


def _events_in(records: list[str]) -> int:
    return sum(r.count(",\n") + 1 for r in records)
