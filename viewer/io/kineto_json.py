"""The bytes, header and events of one Kineto (torch.profiler) trace, read a few MiB at a time.

Kineto writes one JSON object: header keys (``schemaVersion``, ``deviceProperties``,
``distributedInfo``, ...), the ``traceEvents`` array with each event spread over several lines, and
more header keys after it (``traceName``, ``baseTimeNanoseconds``; lists whose strings hold ``]``).
Other writers put everything on one line. So the array's end is found from the back (a ``]`` whose
tail parses), and pieces are cut at a ``}`` followed by ``,`` rather than at line ends; a cut that
falls inside a string or a nested object shows as an error at the very end of the piece, and the
piece grows to the next cut. An error inside a piece is damage: the events
before it are kept, the events up to the next cut are skipped and recorded (line, why, events lost),
and reading goes on. A file that ends inside the array was cut (``stop_offset``).
"""
from __future__ import annotations

import re

from viewer.io.chrome_json import _BAD_JSON, JsonTrace, loads

CHUNK_BYTES = 512 << 10   # a piece's parsed objects weigh ~8x its bytes: keep them small against the trace
_EVENT_END = re.compile(rb"\}\s*,")
_SPACE = b" \t\r\n"
_MAX_BACKTRACK = 32   # candidate cuts tried before damage when salvaging the events ahead of it


class KinetoReader(JsonTrace):
    """``header`` (every top-level key but traceEvents), ``closed`` (the array and object were
    complete), ``stop_offset`` (where a cut file stopped, else ``size``), ``skipped``
    (``[{"line", "byte", "reason", "events"}]``), ``damage`` (a broken gzip stream), ``n_events``."""

    @property
    def dropped(self) -> bool:
        """The file stopped inside the event array (or its gzip stream broke off)."""
        return not self.closed or self.damage is not None

    # ---- events -------------------------------------------------------------------------------
    def _find_end(self) -> int:
        """Where the event array closes (its ``]``), or the file's end when it never does. Candidates
        are tried from the end: a ``]`` after an event's ``}`` whose tail (``}`` or ``, "k": v ...}``)
        parses; a tail may hold lists of strings with ``]`` in them (Kineto's INFO lines)."""
        data, hi = self.data, self.size
        for _ in range(256):
            k = data.rfind(b"]", self._start, hi)
            if k < 0:
                break
            j = k - 1
            while j >= self._start and data[j] in _SPACE:
                j -= 1
            if j < self._start or data[j] in b"},[":   # after an event, or an empty array
                if self._tail(k + 1):
                    return k
            hi = k
        return self.size

    def _tail(self, pos: int) -> bool:
        """Header keys after the event array: the file is closed when they (and the object) are."""
        rest = bytes(self.data[pos:]).strip()
        if not rest or rest == b"}":   # the array form ends at its bracket
            self.closed = not rest or self.data[self._start - 1:self._start] == b"["
            return True
        if rest.startswith(b",") and rest.endswith(b"}"):
            try:
                tail = loads(b"{" + rest[1:])
            except _BAD_JSON:
                return False
            if isinstance(tail, dict):
                self.header.update(tail)
                self.closed = True
                return True
        return False

    def chunks(self):
        """Yield lists of event objects in file order (damaged pieces skipped and recorded)."""
        data = self.data
        end = self._find_end()
        pos = self._start
        while True:
            while pos < end and data[pos] in b" \t\r\n,":
                pos += 1
            if pos >= end:
                return
            got, pos = self._piece(pos, end)
            if got:
                self.n_events += len(got)
                yield got

    def _piece(self, pos: int, end: int):
        """``(events, next position)`` for the piece starting at ``pos``."""
        cut = self._cut(min(pos + CHUNK_BYTES, end), end)
        while True:
            try:
                return self._objects(self._decode(pos, cut), pos), cut
            except _BAD_JSON as exc:
                text = bytes(self.data[pos:cut])
                at = pos + _byte_pos(text, getattr(exc, "pos", None))
                why = str(exc).splitlines()[0][:80]
            if at >= cut - 1 and cut < end:   # the cut fell inside a string or a nested object
                cut = self._cut(cut, end)
                continue
            return self._salvage(pos, at, end, why)

    def _decode(self, pos: int, cut: int) -> list:
        """``data[pos:cut]`` parsed as an array, in place: the separators on either side become
        ``[`` and ``]`` for the call (no copy of the text), then are put back."""
        data = self.data
        if pos < 1 or cut >= len(data):
            return loads(b"[" + bytes(data[pos:cut]) + b"]")
        a, b = data[pos - 1], data[cut]
        data[pos - 1], data[cut] = 0x5B, 0x5D
        try:
            with memoryview(data) as mv:
                return loads(mv[pos - 1:cut + 1])
        finally:
            data[pos - 1], data[cut] = a, b

    def _cut(self, frm: int, end: int) -> int:
        m = _EVENT_END.search(self.data, frm, end)
        return m.start() + 1 if m else end

    def _objects(self, got: list, pos: int) -> list:
        out = [e for e in got if e.__class__ is dict]
        if len(out) < len(got):
            self.skip(pos, "not an event object", len(got) - len(out))
        return out

    def _salvage(self, pos: int, at: int, end: int, why: str):
        """The events before the damage at ``at``; skip to the next event end after it. A prefix that
        fails before its end holds an earlier damage (orjson checks UTF-8 before syntax): that one
        is where the skipping starts."""
        data = self.data
        good, stop = [], pos
        hi = at
        for _ in range(_MAX_BACKTRACK):
            k = data.rfind(b"}", pos, hi)
            if k < 0:
                break
            text = bytes(data[pos:k + 1]).rstrip(b" \t\r\n,")
            try:
                good = self._objects(loads(b"[" + text + b"]"), pos)
                stop = k + 1
                break
            except _BAD_JSON as exc:
                e = pos + _byte_pos(text, getattr(exc, "pos", None))
                if e < k - 1:
                    at, why = e, str(exc).splitlines()[0][:80]
                hi = min(k, at)
        nxt = self._cut(at, end)
        if nxt >= end and not self.closed:   # nothing complete after the damage: the file was cut here
            self.stop_offset = stop
            return good, end
        lost = max(1, data.count(b'"ph"', stop, nxt))
        self.skip(at, f"not valid JSON ({why})", lost)
        return good, nxt


def _byte_pos(text: bytes, char_pos) -> int:
    """Byte offset in ``text`` of orjson's error (its position counts characters of ``[`` + text;
    invalid UTF-8 it reports at 0, so that is found here)."""
    if char_pos is None:
        return len(text)
    if text.isascii():
        return max(0, char_pos - 1)
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as exc:
        if char_pos <= 1:
            return exc.start
    head = text[:4 * char_pos + 4].decode("utf-8", "replace")
    return max(0, len(("[" + head)[:char_pos].encode()) - 1)
