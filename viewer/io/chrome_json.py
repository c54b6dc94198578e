"""Chrome-trace JSON files (object or array form, plain or gzip): bytes, header and event lines, bad lines skipped."""
from __future__ import annotations

import os
import re
import zlib
from pathlib import Path

import orjson

from viewer.errors import TraceError

CHUNK_BYTES = 4 << 20
DEFAULT_MAX_TRACE_BYTES = 8 << 30
_SEP = b" \t\r\n,"
_NON_SPACE = re.compile(rb"\S")
_ARRAY_OPENS = re.compile(rb"[ \t\r\n:]*\[")
_BAD_JSON = (orjson.JSONDecodeError, RecursionError, ValueError)
loads = orjson.loads


def max_trace_bytes() -> int:
    """The most bytes one trace may hold once decompressed: ``$RINGSCOPE_MAX_TRACE_BYTES`` (default 8 GiB)."""
    try:
        return max(1, int(os.environ.get("RINGSCOPE_MAX_TRACE_BYTES", DEFAULT_MAX_TRACE_BYTES)))
    except ValueError:
        return DEFAULT_MAX_TRACE_BYTES


def _too_big(p, cap):
    return TraceError(p, f"larger than {cap} bytes once decompressed (the RINGSCOPE_MAX_TRACE_BYTES limit)")


def read_bytes(path, cap: int | None = None) -> tuple[bytearray, str | None]:
    """``(data, damage)``: the file's bytes, gunzipped up to ``cap``, and why they end early (a cut gzip stream)."""
    p = Path(path)
    cap = max_trace_bytes() if cap is None else cap
    if not p.exists():
        raise TraceError(p, "no such file")
    if p.is_dir():
        raise TraceError(p, "is a directory, not a trace file")
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(2)
            if head != b"\x1f\x8b":
                if size > cap:
                    raise _too_big(p, cap)
                raw = bytearray(size)
                raw[:len(head)] = head
                n = fh.readinto(memoryview(raw)[len(head):])
                del raw[len(head) + n:]
                return raw, None
            fh.seek(0)
            return _gunzip(p, fh, cap)
    except OSError as exc:
        raise TraceError(p, f"cannot read: {exc.strerror or exc}") from None


def _gunzip(p, fh, cap):
    out = bytearray()
    dec = zlib.decompressobj(wbits=31)
    step = 1 << 20
    damage = None
    pos = 0
    while True:
        chunk = fh.read(step)
        if not chunk:
            if not dec.eof and (out or pos):
                damage = f"gzip stream cut at compressed byte {pos}"
            break
        while chunk:
            try:
                piece = dec.decompress(chunk, step)
            except zlib.error as exc:
                if not out:
                    raise TraceError(p, f"corrupt gzip data ({exc})") from None
                return out, f"corrupt gzip data near compressed byte {pos} ({exc})"
            out += piece
            if len(out) > cap:
                raise _too_big(p, cap)
            if dec.eof:  # the next member (a concatenated .gz), unless the rest is padding
                chunk = dec.unused_data
                if not chunk.strip(b"\x00"):
                    chunk = b""
                    continue
                dec = zlib.decompressobj(wbits=31)
            else:
                chunk = dec.unconsumed_tail
        pos = fh.tell()
    return out, damage


def find_events_start(data, damage, header: dict, path) -> tuple[str, int]:
    """``(form, offset)`` where the events begin, the keys before them added to ``header``."""
    m = _NON_SPACE.search(data)
    if m is None:
        raise TraceError(path, "empty file" if not damage else f"no data ({damage})")
    if b"\x00" in data[:4096]:
        raise TraceError(path, "binary data, not a JSON trace")
    i = m.start()
    first = data[i:i + 1]
    if first == b"[":
        return "array", i + 1
    if first != b"{":
        snippet = data[i:i + 20].decode("utf-8", "replace").split("\n")[0]
        raise TraceError(path, f"not JSON (starts with {snippet!r})")
    key = data.find(b'"traceEvents"')
    if key < 0:
        try:
            obj = loads(data)
        except _BAD_JSON:
            raise TraceError(path, "not valid JSON (object without a traceEvents array)") from None
        raise TraceError(path, "no trace events (empty JSON object)" if obj == {} else
                         "wrong shape: JSON object without a 'traceEvents' array")
    opened = _ARRAY_OPENS.match(data, key + len(b'"traceEvents"'))
    if opened is None:
        raise TraceError(path, "wrong shape: 'traceEvents' is not an array")
    prefix = bytes(data[i:key]).rstrip().rstrip(b",")
    if prefix.strip() != b"{":
        try:
            hdr = loads(prefix + b"}")
        except _BAD_JSON:
            raise TraceError(path, "not valid JSON before 'traceEvents'") from None
        if isinstance(hdr, dict):
            header.update(hdr)
    return "object", opened.end()


class JsonTrace:
    """One JSON trace file's bytes, read whole, its header, and the pieces of it skipped (``skipped``)."""

    def __init__(self, path):
        self.path = str(path)
        self.data, self.damage = read_bytes(path)
        self.size = len(self.data)
        self.header: dict = {}
        self.closed = False
        self.stop_offset = self.size
        self.n_events = 0
        self.skipped: list = []
        self.form, self._start = find_events_start(self.data, self.damage, self.header, self.path)

    def skip(self, offset: int | None, reason: str, events: int = 1) -> None:
        """Record a skipped piece of the file (at most 1000 kept; ``events`` counted for all)."""
        if len(self.skipped) < 1000:
            line = None if offset is None else self.data.count(b"\n", 0, offset) + 1
            self.skipped.append({"line": line, "byte": offset, "reason": reason, "events": events})
        else:
            self.skipped[-1]["events"] += events

    def _trailing_header(self, rest: bytes) -> bool:
        """Header keys after the event array (``, "k": v ...}``): merged, and the file is closed."""
        try:
            tail = loads(b"{" + rest[1:]) if rest.startswith(b",") and rest.endswith(b"}") else None
        except _BAD_JSON:
            return False
        if isinstance(tail, dict):
            self.header.update(tail)
            self.closed = True
            return True
        return False


class TraceReader(JsonTrace):
    """The header and event lines of one Chrome-trace file, parsed a few MiB at a time."""

    @property
    def dropped(self) -> bool:
        """The file stopped in the middle of an event (or its gzip stream broke off)."""
        return self.stop_offset < self.size or self.damage is not None

    def other(self, key: str) -> dict:
        """``otherData[key]`` when it is an object, else {}."""
        other = self.header.get("otherData")
        got = other.get(key) if isinstance(other, dict) else None
        return got if isinstance(got, dict) else {}

    def events_end(self) -> int:
        """Where the event lines end (at the closing bracket when the JSON is complete: ``closed``)."""
        data, start = self.data, self._start
        tail_from = max(start, self.size - 4096)
        s = bytes(data[tail_from:]).rstrip()
        if self.form == "array":
            if s.endswith(b"]"):
                self.closed = True
                return tail_from + len(s) - 1
            return self.size
        idx = len(s)
        for _ in range(20):
            idx = s.rfind(b"]", 0, idx)
            if idx < 0:
                break
            rem = s[idx + 1:].strip()
            if rem == b"}":
                self.closed = True
                return tail_from + idx
            if self._trailing_header(rem):
                return tail_from + idx
        return self.size

    def chunks(self):
        """Yield lists of event dicts, in file order (bad lines skipped and recorded)."""
        data, pos, n = self.data, self._start, self.events_end()
        while pos < n:
            end = min(pos + CHUNK_BYTES, n)
            if end < n:
                nl = data.find(b"\n", end, n)
                end = n if nl < 0 else nl + 1
            events = self.parse_lines(pos, end, last=end == n)
            if events:
                self.n_events += len(events)
                yield events
            pos = end

    def parse_lines(self, pos: int, end: int, last: bool) -> list:
        """The event objects in ``data[pos:end]``: at once when it is clean, else line by line."""
        s = bytes(self.data[pos:end]).strip(_SEP)
        if not s:
            return []
        try:
            got = loads(b"[" + s + b"]")
            if all(e.__class__ is dict for e in got):
                return got
        except _BAD_JSON:
            pass
        out = []
        here = pos
        lines = bytes(self.data[pos:end]).split(b"\n")
        tail = max((k for k, x in enumerate(lines) if x.strip(_SEP)), default=-1) if last else -1
        for k, line in enumerate(lines):
            out.extend(self.parse_line(line, here, k == tail))
            here += len(line) + 1
        return out

    def parse_line(self, line: bytes, at: int, last: bool = False) -> list:
        """The event objects of one line: a bad line is skipped, unless it is the cut last one."""
        s = line.strip(_SEP)
        if not s:
            return []
        try:
            got = loads(b"[" + s + b"]")
        except _BAD_JSON as exc:
            try:   # events written without a separator (``}{``)
                got = loads(b"[" + s.replace(b"}{", b"},{") + b"]") if b"}{" in s else None
            except _BAD_JSON:
                got = None
            if got is not None:
                self.skip(at, "events glued together without a separator (read apart)", 0)
            else:
                if last and not self.closed:
                    self.stop_offset = at + len(line) - len(line.lstrip(_SEP))
                    return []
                self.skip(at, f"not valid JSON ({str(exc).splitlines()[0][:80]})", max(1, s.count(b'"ph"')))
                return []
        out = [e for e in got if e.__class__ is dict]
        if len(out) < len(got):
            self.skip(at, "not an event object", len(got) - len(out))
        return out


def file_signature(path) -> tuple[int, int]:
    """(size, mtime_ns) of a file: the cache key."""
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def read_header(path) -> dict:
    """The keys before the event array, read from the file's first bytes (the whole file only when they run past
    them, or for an array-form trace); a file that is no trace raises :class:`TraceError` as a full read would."""
    from viewer.io.files import first_bytes

    head = first_bytes(Path(path))
    if b'"traceEvents"' not in head:
        return JsonTrace(path).header
    header: dict = {}
    find_events_start(head, None, header, str(path))
    return header
