"""Read one ringscope trace (format 3) into columns with the C scanner; damaged lines and values skipped, recorded."""
from __future__ import annotations

import math

import numpy as np

from tracer import vocab as V
from viewer.errors import TraceError
from viewer.io import _eventscan
from viewer.io.chrome_json import _BAD_JSON, TraceReader, loads
from viewer.io.columns import Columns
from viewer.io.ranges import CHROME_PHASES, INT32, MAX_BYTES, MAX_EPOCH_NS, MAX_NS, MAX_US, outside

_STR_ARGS = ("tensor", "op", "dtype", "backend", "error")
# the integer args the tables read, and what each can mean: lo <= value < hi
INT_ARGS = {"step": (-1, INT32), "response": (-1, 1 << 53), "bytes": (0, MAX_BYTES), "process_set": (0, INT32),
            "rank": (0, INT32), "count": (0, INT32), "threshold": (0, MAX_BYTES), "size": (0, INT32),
            "cycle": (0, 1 << 53), "queue_ns": (0, MAX_NS), "priority": (-(1 << 53), 1 << 53)}
# the fields the tables use, as the scanner reads them (each costs it a little on every row)
FIELDS = (("ph", "s"), ("name", "s"), ("cat", "s"), ("tid", "i"), ("ts", "f"), ("dur", "f"), ("pid", "i"),
          ("args", "o"), *((f"args.{k}", "s") for k in _STR_ARGS), *((f"args.{k}", "i") for k in INT_ARGS),
          ("args.tensors", "l"), ("args.value", "f"))
_READ, _ABSENT, _NULL, _TYPE = 1, 0, 2, 3
_RANK = (0, INT32)
_OFFSET = (-(1 << 53), 1 << 53)   # ns between two hosts' clocks: ~104 days either way
# the header's (and the SHUTDOWN record's) integers, and what each can mean: lo <= value < hi
META_INTS = {"rank": _RANK, "size": _RANK, "local_rank": _RANK, "local_size": _RANK, "cross_rank": _RANK,
             "cross_size": _RANK, "pid": (0, 1 << 62), "fusion_threshold": (0, MAX_BYTES),
             "base_epoch_ns": (0, MAX_EPOCH_NS), "clock_offset_ns": _OFFSET,
             "clock_offset_uncertainty_ns": (0, _OFFSET[1]), "part": _RANK, "format_version": _RANK,
             "events_dropped": (0, 1 << 62)}


def read(path):
    """``(reader, columns)``: the :class:`TraceReader` and the file's events as :class:`Columns`."""
    reader = TraceReader(path)
    meta = reader.other(V.VERSION_KEY)
    version = meta.get("format_version")
    if isinstance(version, int) and version < 3:
        raise TraceError(path, f"trace format {version} is no longer read (this ringscope reads format 3: "
                               "record the run again)")
    start, end = reader._start, reader.events_end()
    end = _cut_tail(reader, start, end)
    scanned = _eventscan.scan(reader.data, start, end, FIELDS, True)
    _damaged_lines(reader, scanned, start, end)
    keep, n_events = _checked(reader, scanned)
    reader.skipped.sort(key=lambda x: -1 if x["byte"] is None else x["byte"])
    cols = Columns(scanned, dict(FIELDS), keep)
    sd = _shutdown_args(reader.data, start, end)
    cols.shutdown = None if sd is None else known(sd)
    reader.data = b""
    if not n_events:
        raise TraceError(path, "no trace events" + (f" ({len(reader.skipped)} damaged line(s) skipped)"
                                                    if reader.skipped else ""))
    return reader, cols


def known(values: dict) -> dict:
    """Header (or SHUTDOWN) ``values``, each damaged integer as None: unknown, not a crash later."""
    out = dict(values)
    for k, (lo, hi) in META_INTS.items():
        v = out.get(k)
        if v is not None and not (v.__class__ is int and lo <= v < hi):
            out[k] = None
    return out


def _cut_tail(reader, start: int, end: int) -> int:
    """An unclosed file's last line, when it is cut mid-event, ends the events (``stop_offset``)."""
    if reader.closed:
        return end
    data = reader.data
    nl = data.rfind(b"\n", start, end)
    last = bytes(data[nl + 1:end]).strip(b" \t\r\n,")
    if not last:
        return end
    try:
        if loads(last).__class__ is dict:
            return end
    except Exception:  # noqa: BLE001 - any parse failure means the line was cut
        pass
    reader.stop_offset = max(nl + 1, start)
    return reader.stop_offset


def _line_start(data, start: int, at: int) -> int:
    return max(start, data.rfind(b"\n", start, at) + 1)


def _damaged_lines(reader, scanned: dict, start: int, end: int) -> None:
    """Record the lines the scanner could not read, non-objects, and events glued together (read apart)."""
    data = reader.data
    for at, _, why, nxt in scanned["errors"]:
        line = _line_start(data, start, at)
        stop = end if nxt < 0 else nxt
        reader.skip(line, f"not valid JSON ({why})", max(1, data.count(b'"ph"', line, stop)))
    for at, _ in scanned["other"]:
        reader.skip(_line_start(data, start, at), "not an event object")
    for at in scanned["glued"]:
        reader.skip(_line_start(data, start, at), "events glued together without a separator (read apart)", 0)


def _checked(reader, scanned: dict):
    """``(keep, events)``: the rows the tables can use (None: all) and the non-metadata count; the rest skipped."""
    c = scanned["columns"]
    n = scanned["rows"]

    def status(name):
        return np.frombuffer(c[name][0], dtype=np.uint8)

    ph_st = status("ph")
    ph = np.frombuffer(c["ph"][1], dtype=np.int32)
    meta = np.isin(ph, [k for k, v in enumerate(c["ph"][2]) if v == "M"]) & (ph_st == _READ)
    wrong = np.isin(ph, [k for k, v in enumerate(c["ph"][2]) if v not in CHROME_PHASES]) & (ph_st == _READ)
    for name, _ in FIELDS:
        wrong |= status(name) == _TYPE
    for k, (lo, hi) in INT_ARGS.items():
        wrong |= outside(np.frombuffer(c[f"args.{k}"][1], dtype=np.int64), status(f"args.{k}") == _READ, lo, hi)
    ts, dur = (np.frombuffer(c[k][1], dtype=np.float64) for k in ("ts", "dur"))
    missing = (ph_st != _READ) | (status("name") != _READ) | (status("ts") != _READ) \
        | ~(np.abs(ts) <= MAX_US) | ~((dur >= 0) & (dur <= MAX_US))
    bad = wrong | missing & ~meta
    if not bad.any():
        return None, n - int(meta.sum())
    data, starts = reader.data, np.frombuffer(scanned["start"], dtype=np.int64)
    ends = np.frombuffer(scanned["end"], dtype=np.int64)
    for r in np.flatnonzero(wrong & ~meta)[:1000].tolist():
        reader.skip(int(starts[r]), _why(data, int(starts[r]), int(ends[r])))
    other = np.flatnonzero(missing & ~wrong & ~meta)
    for r in other[:1000].tolist():
        reader.skip(int(starts[r]), "event without 'ph', 'name' or 'ts', or a time out of range")
    if len(other) > 1000:
        reader.skip(int(starts[other[1000]]), "more such events", len(other) - 1000)
    return ~bad, n - int(bad.sum()) - int((meta & ~bad).sum())


def _num(v) -> bool:
    return (v.__class__ is int or v.__class__ is float) and math.isfinite(v)


def _why(data, lo: int, hi: int) -> str:
    """Why the event in ``data[lo:hi]``, which has a value of the wrong type, cannot be used."""
    try:
        ev = loads(bytes(data[lo:hi]))
    except _BAD_JSON as exc:   # valid to the scanner, so not expected: say what the parser says
        return f"not valid JSON ({str(exc).splitlines()[0][:80]})"
    ph, name = ev.get("ph"), ev.get("name")
    if ph.__class__ is not str or name.__class__ is not str:
        return "event without a string 'ph' and 'name'"
    if ph not in CHROME_PHASES:
        return f"'ph' is {_what(ph)}, not a trace event phase"
    for k in ("ts", "dur"):
        v = ev.get(k, 0.0 if k == "dur" else None)
        if not (_num(v) and abs(v) <= MAX_US and (k == "ts" or v >= 0)):
            return f"'{k}' is {_what(v)}, not a time in µs"
    for k in ("tid", "pid"):
        v = ev.get(k)
        if v is not None and not _int64(v):
            return f"'{k}' is {_what(v)}, not an integer"
    cat = ev.get("cat")
    if cat is not None and cat.__class__ is not str:
        return f"'cat' is {_what(cat)}, not a string"
    a = ev.get("args")
    if a is not None and a.__class__ is not dict:
        return f"'args' is {_what(a)}, not an object"
    for k, v in (a or {}).items():
        if v is None:
            continue
        if k in _STR_ARGS and v.__class__ is not str or k in INT_ARGS and not _int64(v) \
                or k == "value" and not _num(v) \
                or k == "tensors" and not (v.__class__ is list and all(t.__class__ is str for t in v)):
            return f"'args.{k}' is {_what(v)}"
        if k in INT_ARGS and not INT_ARGS[k][0] <= v < INT_ARGS[k][1]:
            return f"'args.{k}' is {v}, outside what it can mean ({INT_ARGS[k][0]} to {INT_ARGS[k][1] - 1})"
    return "a value of the wrong type"


def _int64(v) -> bool:
    return v.__class__ is int and -(1 << 63) <= v < (1 << 63)


def _what(v) -> str:
    return f"{type(v).__name__} {str(v)[:24]!r}" if v is not None else "null"


def _shutdown_args(buf, start: int, end: int) -> dict | None:
    """The integer args of the last SHUTDOWN record, read from its line (None when there is none)."""
    needle = b'"' + V.SHUTDOWN.encode() + b'"'
    hi = end
    while True:
        pos = buf.rfind(needle, start, hi)
        if pos < 0:
            return None
        lo = max(start, buf.rfind(b"\n", start, pos) + 1)
        nl = buf.find(b"\n", pos, end)
        try:
            ev = loads(bytes(buf[lo:end if nl < 0 else nl]).strip().rstrip(b","))
        except Exception:  # noqa: BLE001 - the name inside some other text, or a damaged line
            ev = None
        if isinstance(ev, dict) and ev.get("name") == V.SHUTDOWN and ev.get("ph") in ("X", "i", "I", "n"):
            args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            return {k: v for k, v in args.items() if k in ("clock_offset_ns", "clock_offset_uncertainty_ns",
                                                            "events_dropped") and _int64(v)}
        hi = pos
