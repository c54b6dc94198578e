"""The header and events of one Kineto (torch.profiler) trace, the events as the C scanner's columns.

Kineto spreads each event over several lines and writes header keys after the array too (lists whose
strings hold ``]``), so the array's end is found from the back: a ``]`` whose tail parses.
"""
from __future__ import annotations

from viewer.io import _eventscan
from viewer.io.chrome_json import JsonTrace

_SPACE = b" \t\r\n"


class KinetoReader(JsonTrace):
    """One Kineto trace file (see :class:`JsonTrace`); ``damage``: a broken gzip stream."""

    @property
    def dropped(self) -> bool:
        """The file stopped inside the event array (or its gzip stream broke off)."""
        return not self.closed or self.damage is not None

    def _find_end(self) -> int:
        """Where the event array closes (its ``]`` after an event, with a tail that parses), else the end."""
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
        """The rest after a candidate ``]`` can end the file (it sets ``closed``)."""
        rest = bytes(self.data[pos:]).strip()
        if not rest or rest == b"}":
            # an object that stops at a bracket was cut (maybe inside an event, at a list of its args)
            self.closed = rest == (b"}" if self.form == "object" else b"")
            return True
        return self._trailing_header(rest)

    def scan(self, fields) -> dict:
        """The event array as columns (:func:`viewer.io._eventscan.scan`), its damage recorded; a bad
        event with no complete one after it in an unclosed file is where the file was cut."""
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
