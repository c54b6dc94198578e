"""Chunked, crash-tolerant reading of Chrome-trace JSON (object or array form, plain or gzip).

The events are parsed a few MiB at a time (cut at line ends), so memory stays near the file size and
a file cut in the middle of an event still yields every complete event before the cut.
"""
from __future__ import annotations

import os
import re
import zlib
from pathlib import Path

from viewer.errors import TraceError

try:
    import orjson as _json

    _loads = _json.loads
    _JSONError = _json.JSONDecodeError
except ImportError:  # pragma: no cover - orjson is in the viewer extra
    import json as _json

    _loads = _json.loads
    _JSONError = ValueError

CHUNK_BYTES = 4 << 20
_MAX_CUTS = 256  # backward "}" positions tried when recovering a cut line
_SEP = b" \t\r\n,"
_NON_SPACE = re.compile(rb"\S")


def loads(data):
    """Parse JSON bytes/str with orjson when present."""
    return _loads(data)


def read_bytes(path) -> bytearray:
    """The file's bytes (mutable, one copy), gunzipped when it is gzip (a truncated .gz yields what it
    holds)."""
    p = Path(path)
    if not p.exists():
        raise TraceError(p, "no such file")
    if p.is_dir():
        raise TraceError(p, "is a directory, not a trace file")
    try:
        with open(p, "rb") as fh:
            raw = bytearray(os.fstat(fh.fileno()).st_size)
            n = fh.readinto(raw)
            del raw[n:]
    except OSError as exc:
        raise TraceError(p, f"cannot read: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        dec = zlib.decompressobj(wbits=47)
        out = bytearray()
        step = 1 << 20
        try:
            for i in range(0, len(raw), step):  # appended piece by piece: no second full-size copy
                out += dec.decompress(memoryview(raw)[i:i + step])
        except zlib.error as exc:
            raise TraceError(p, f"corrupt gzip data ({exc})") from None
        del raw
        raw = out
    return raw


class TraceReader:
    """Streams the events of one Chrome-trace file in chunks.

    After :meth:`chunks` is exhausted: ``form`` ("object"|"array"), ``header`` (top-level keys other
    than traceEvents), ``closed`` (the JSON was complete), ``dropped`` (bytes after the last complete
    event were discarded), ``stop_offset`` (byte offset where reading stopped), ``size``.
    """

    def __init__(self, path):
        self.path = str(path)
        self.data = read_bytes(path)
        self.size = len(self.data)
        self.header: dict = {}
        self.closed = False
        self.dropped = False
        self.stop_offset = self.size
        self.n_events = 0
        self.form, self._start = self._find_events_start()

    # ---- header ---------------------------------------------------------------------------
    def _fail(self, problem: str):
        raise TraceError(self.path, problem)

    def _find_events_start(self):
        data = self.data
        m = _NON_SPACE.search(data)
        if m is None:
            self._fail("empty file")
        head = data[:4096]
        if b"\x00" in head:
            self._fail("binary data, not a JSON trace")
        i = m.start()
        first = data[i:i + 1]
        if first == b"[":
            return "array", i + 1
        if first != b"{":
            snippet = data[i:i + 20].decode("utf-8", "replace").split("\n")[0]
            self._fail(f"not JSON (starts with {snippet!r})")
        key = data.find(b'"traceEvents"')
        if key < 0:
            try:
                obj = loads(data)
            except _JSONError:
                self._fail("not valid JSON (object without a traceEvents array)")
            self._fail("wrong shape: JSON object without a 'traceEvents' array"
                       if isinstance(obj, dict) else "wrong shape: not a Chrome trace")
        j = key + len(b'"traceEvents"')
        while j < len(data) and data[j] in b" \t\r\n:":
            j += 1
        if data[j:j + 1] != b"[":
            self._fail("wrong shape: 'traceEvents' is not an array")
        prefix = data[i:key].rstrip().rstrip(b",")
        if prefix.strip() != b"{":
            try:
                hdr = loads(prefix + b"}")
            except _JSONError:
                self._fail("not valid JSON before 'traceEvents'")
            if isinstance(hdr, dict):
                self.header.update(hdr)
        return "object", j + 1

    # ---- events ---------------------------------------------------------------------------
    def chunks(self):
        """Yield lists of event dicts, in file order."""
        data, n, pos = self.data, self.size, self._start
        while pos < n:
            end = min(pos + CHUNK_BYTES, n)
            if end < n:
                nl = data.find(b"\n", end)
                end = n if nl < 0 else nl + 1
            piece = data[pos:end]
            if end == n:
                piece = self._strip_close(piece)
            events, ok = self._parse_piece(piece, pos)
            if events:
                if not isinstance(events[0], dict):
                    self._fail("wrong shape: trace events are not JSON objects")
                self.n_events += len(events)
                yield events
            if not ok:
                return
            pos = end
        if not self.closed:
            self.stop_offset = n

    def _strip_close(self, piece: bytes) -> bytes:
        """Remove the closing bracket(s) (and a trailing header, object form) from the last piece."""
        s = piece.rstrip()
        if self.form == "array":
            if s.endswith(b"]"):
                self.closed = True
                return s[:-1]
            return piece
        idx = len(s)
        for _ in range(20):
            idx = s.rfind(b"]", 0, idx)
            if idx < 0:
                break
            rem = s[idx + 1:].strip()
            if rem == b"}":
                self.closed = True
                return s[:idx]
            if rem.startswith(b",") and rem.endswith(b"}"):
                try:
                    tail = loads(b"{" + rem[1:])
                except _JSONError:
                    continue
                if isinstance(tail, dict):
                    self.header.update(tail)
                    self.closed = True
                    return s[:idx]
        return piece

    def _parse_piece(self, piece: bytes, offset: int):
        """(events, ok): ok False when the piece ends in an incomplete or broken event."""
        s = piece.strip(_SEP)
        if not s:
            return [], True
        try:
            return loads(b"[" + s + b"]"), True
        except _JSONError:
            pass
        return self._parse_lines(piece, offset)

    def _parse_lines(self, piece: bytes, offset: int):
        out = []
        line_start = 0
        for line in piece.split(b"\n"):
            here = line_start
            line_start += len(line) + 1
            s = line.strip(_SEP)
            if not s:
                continue
            try:
                out.extend(loads(b"[" + s + b"]"))
                continue
            except _JSONError:
                pass
            lead = len(line) - len(line.lstrip(_SEP))
            cut = self._recover_prefix(s, out)
            self.dropped = True
            self.closed = False
            self.stop_offset = offset + here + lead + cut
            return out, False
        return out, True

    @staticmethod
    def _recover_prefix(s: bytes, out: list) -> int:
        """Append the complete events at the start of a cut line; return the bytes used."""
        idx = len(s)
        for _ in range(_MAX_CUTS):
            idx = s.rfind(b"}", 0, idx)
            if idx < 0:
                return 0
            try:
                out.extend(loads(b"[" + s[:idx + 1] + b"]"))
                return idx + 1
            except _JSONError:
                continue
        return 0


def file_signature(path) -> tuple[int, int]:
    """(size, mtime_ns) of a file: the cache key."""
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns
