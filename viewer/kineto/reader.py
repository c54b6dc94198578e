"""The header and events of one Kineto (torch.profiler) trace: the events as columns, in one pass.

Kineto writes one JSON object: header keys (``schemaVersion``, ``deviceProperties``,
``distributedInfo``, ...), the ``traceEvents`` array with each event spread over several lines, and
more header keys after it (``traceName``, ``baseTimeNanoseconds``; lists whose strings hold ``]``).
Other writers put everything on one line. So the array's end is found from the back (a ``]`` whose
tail parses), and the array itself is walked once by the C scanner (``viewer.io._eventscan``), which
keeps the fields the tables use. An event that is not valid JSON is damage: it is skipped up to the
next ``}`` followed by ``,`` and recorded (line, why, events lost), and reading goes on. A file that
ends inside the array was cut (``stop_offset``).
"""
from __future__ import annotations

from viewer.io import _eventscan
from viewer.io.chrome_json import _BAD_JSON, JsonTrace, loads

_SPACE = b" \t\r\n"


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
        if not rest or rest == b"}":
            # the array form ends at its bracket, the object form with its brace after it; an object
            # that stops at a bracket was cut (maybe inside an event, at a list of its args)
            self.closed = rest == (b"}" if self.form == "object" else b"")
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

    def scan(self, fields) -> dict:
        """The event array as columns (:func:`viewer.io._eventscan.scan` with ``fields``), its damage
        recorded: an event that is not valid JSON is skipped up to the next event end (line, why,
        events lost); when no complete event follows it in an unclosed file, the file was cut there
        (``stop_offset``)."""
        end = self._find_end()
        got = _eventscan.scan(self.data, self._start, end, fields, False)
        for at, err_at, why, nxt in got["errors"]:
            if nxt < 0 and not self.closed:
                self.stop_offset = at
                break
            self.skip(err_at, f"not valid JSON ({why})", max(1, self.data.count(b'"ph"', at, end if nxt < 0 else nxt)))
        for at, _ in got["other"]:
            self.skip(at, "not an event object")
        for at in got["glued"]:
            self.skip(at, "events glued together without a separator (read apart)", 0)
        self.n_events = got["rows"]
        return got
