"""Read one ringscope trace (format 3, one event per line) into Arrow columns.

Clean files go to pyarrow's JSON reader in one piece: each line's trailing comma becomes a space
(newline-delimited JSON, in place, no copy), read against an explicit schema of the fields the tables
use. When Arrow refuses the file (a damaged line, a value of the wrong type) or a line is not an
object (Arrow must never see one: ``null`` crashes it), the lines are read one by one instead: what
cannot be used is skipped and recorded with its line, and the rest goes to Arrow as rows. Either way
rows with times out of range are dropped and recorded too.
"""
from __future__ import annotations

import math

import numpy as np

from tracer import vocab as V
from viewer.errors import TraceError
from viewer.io.chrome_json import TraceReader, loads

MAX_US = 1e15   # |ts| and dur beyond ~31 years in µs are damage, not time (and would overflow ns)
_STR_ARGS = ("tensor", "op", "dtype", "backend", "error")
_INT_ARGS = ("step", "response", "bytes", "process_set", "rank", "count", "threshold", "size", "cycle",
             "queue_ns", "priority")


def schema():
    """The fields the tables use (every field costs the reader time on every row)."""
    import pyarrow as pa

    i, s, f = pa.int64(), pa.string(), pa.float64()
    args = pa.struct([(k, s) for k in _STR_ARGS] + [(k, i) for k in _INT_ARGS]
                     + [("tensors", pa.list_(s)), ("value", f)])
    return pa.schema([("ph", s), ("name", s), ("cat", s), ("tid", i), ("ts", f), ("dur", f),
                      ("args", args), ("pid", i)])


def read(path):
    """``(reader, columns)``: the :class:`TraceReader` (header, closed, stop_offset, skipped) and the
    file's events as :class:`viewer.io.columns.Columns` (metadata rows included)."""
    from viewer.io.columns import Columns

    reader = TraceReader(path)
    meta = reader.other(V.VERSION_KEY)
    version = meta.get("format_version")
    if isinstance(version, int) and version < 3:
        raise TraceError(path, f"trace format {version} is no longer read (this ringscope reads format 3: "
                               "record the run again)")
    start, end = reader._start, reader.events_end()
    end = _cut_tail(reader, start, end)
    table = _arrow(reader, start, end) if _clean(reader.data, start, end) else None
    if table is None:
        table = _salvage(reader, start, end)
    flat, n_events = _checked(reader, table, start, end)
    cols = Columns(flat)
    cols.shutdown = _shutdown_args(reader.data, start, end)
    reader.data = b""
    if not n_events:
        raise TraceError(path, "no trace events" + (f" ({len(reader.skipped)} damaged line(s) skipped)"
                                                    if reader.skipped else ""))
    return reader, cols


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


def _clean(data, start: int, end: int) -> bool:
    """Every non-blank line looks like one object: ``{`` first, ``}`` or ``},`` last (a cheap
    look at the line ends only)."""
    if data.find(b"}{", start, end) >= 0:   # events glued together: read apart line by line
        return False
    arr = np.frombuffer(data, dtype=np.uint8)[start:end]
    if not len(arr):
        return True
    nl = np.flatnonzero(arr == 10)
    starts = np.r_[0, nl + 1]
    stops = np.r_[nl, len(arr)]
    keep = stops > starts
    starts, stops = starts[keep], stops[keep]
    first, lastc = arr[starts], arr[stops - 1]
    lastc = np.where(lastc == 13, arr[np.maximum(stops - 2, 0)], lastc)  # \r\n line ends
    before = arr[np.maximum(stops - 2, 0)]
    blank = np.isin(first, (32, 9, 13, 44)) & (stops - starts <= 2)
    ok = (first == 123) & ((lastc == 125) | ((lastc == 44) & (before == 125)))
    return bool((ok | blank).all())


def _arrow(reader, start: int, end: int):
    """The event lines read by Arrow, or None when it refuses them (commas put back then)."""
    import pyarrow as pa
    import pyarrow.json as pj

    buf = reader.data
    arr = np.frombuffer(buf, dtype=np.uint8)
    w = arr[start:end]
    nl = np.flatnonzero(w == 10)
    prev = np.maximum(nl - 1, 0)
    seps = prev[w[prev] == 44] + start
    tail = end - 1
    while tail > start and buf[tail] in b" \t\r\n":
        tail -= 1
    if tail >= start and buf[tail] == 44:
        seps = np.append(seps, tail)
    arr[seps] = 32
    view = memoryview(buf)[start:end]
    try:
        table = pj.read_json(pa.BufferReader(pa.py_buffer(view)),
                             read_options=pj.ReadOptions(use_threads=False, block_size=1 << 20),
                             parse_options=pj.ParseOptions(explicit_schema=schema(),
                                                           unexpected_field_behavior="ignore"))
        table.validate(full=True)   # Arrow's reader lets invalid UTF-8 through; this finds it
        return table
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        arr[seps] = 44
        return None
    finally:
        try:
            view.release()
        except BufferError:  # still exported to Arrow; freed with it
            pass


def _salvage(reader, start: int, end: int):
    """The event lines read one by one: every event with usable fields becomes a row."""
    import pyarrow as pa

    rows = []
    data, pos = reader.data, start
    while pos < end:
        nl = data.find(b"\n", pos, end)
        stop = end if nl < 0 else nl
        line = bytes(data[pos:stop])
        for ev in reader.parse_line(line, pos):
            row, why = _row(ev)
            if row is not None:
                rows.append(row)
            elif why:
                reader.skip(pos, why)
        pos = stop + 1
    return pa.Table.from_pylist(rows, schema=schema())


def _num(v) -> bool:
    return (v.__class__ is int or v.__class__ is float) and math.isfinite(v)


def _row(ev: dict):
    """``(row, None)``, or ``(None, why)`` for an event the tables cannot use (``(None, None)``:
    a metadata event, not a loss)."""
    ph, name = ev.get("ph"), ev.get("name")
    if ph == "M":
        return None, None
    if ph.__class__ is not str or name.__class__ is not str:
        return None, "event without a string 'ph' and 'name'"
    for k in ("ts", "dur"):
        v = ev.get(k, 0.0 if k == "dur" else None)
        if not (_num(v) and abs(v) <= MAX_US):
            return None, f"'{k}' is {_what(v)}, not a time in µs"
    for k in ("tid", "pid"):
        v = ev.get(k)
        if v is not None and not _int64(v):
            return None, f"'{k}' is {_what(v)}, not an integer"
    cat = ev.get("cat")
    if cat is not None and cat.__class__ is not str:
        return None, f"'cat' is {_what(cat)}, not a string"
    a = ev.get("args")
    if a is not None and a.__class__ is not dict:
        return None, f"'args' is {_what(a)}, not an object"
    args = {}
    for k, v in (a or {}).items():
        if v is None:
            continue
        if k in _STR_ARGS and v.__class__ is not str or k in _INT_ARGS and not _int64(v) \
                or k == "value" and not _num(v) \
                or k == "tensors" and not (v.__class__ is list and all(t.__class__ is str for t in v)):
            return None, f"'args.{k}' is {_what(v)}"
        args[k] = v
    return {"ph": ph, "name": name, "cat": cat, "tid": ev.get("tid"), "ts": ev.get("ts"),
            "dur": ev.get("dur"), "args": args or None, "pid": ev.get("pid")}, None


def _int64(v) -> bool:
    return v.__class__ is int and -(1 << 63) <= v < (1 << 63)


def _what(v) -> str:
    return f"{type(v).__name__} {str(v)[:24]!r}" if v is not None else "null"


def _checked(reader, table, start: int, end: int):
    """``(table, events)``: the table flattened (``args.step``, ...) without rows lacking ph, name or
    ts or with times out of range (each recorded), and how many non-metadata events it holds."""
    import pyarrow.compute as pc

    flat = table.flatten().flatten()
    ph, name = flat.column("ph"), flat.column("name")
    meta = pc.fill_null(pc.equal(ph, "M"), False)
    ts, dur = flat.column("ts"), flat.column("dur")
    bad_t = pc.or_(pc.fill_null(pc.greater(pc.abs(ts), MAX_US), False),
                   pc.fill_null(pc.greater(pc.abs(dur), MAX_US), False))
    bad_t = pc.or_(bad_t, pc.or_(pc.is_nan(pc.fill_null(ts, 0.0)), pc.is_nan(pc.fill_null(dur, 0.0))))
    bad = pc.or_(pc.or_(pc.is_null(ph), pc.is_null(name)), pc.or_(pc.is_null(ts), bad_t))
    bad = pc.and_(bad, pc.invert(meta))
    n_bad = pc.sum(bad).as_py() or 0
    if n_bad:
        rows = np.flatnonzero(np.asarray(bad.to_numpy(zero_copy_only=False)))
        at = _row_offsets(reader.data, start, end)
        for r in rows[:1000].tolist():
            reader.skip(int(at[r]) if r < len(at) else start, "event without 'ph', 'name' or 'ts', or a "
                        "time out of range")
        if len(rows) > 1000:
            reader.skip(start, "more such events", len(rows) - 1000)
    # metadata rows stay (the builder selects rows by phase): filtering copies every column
    return (flat.filter(pc.invert(bad)) if n_bad else flat), flat.num_rows - n_bad - (pc.sum(meta).as_py() or 0)


def _row_offsets(data, start: int, end: int):
    """Byte offset of each non-blank line (one Arrow row per line)."""
    arr = np.frombuffer(data, dtype=np.uint8)[start:end]
    nl = np.flatnonzero(arr == 10)
    starts = np.r_[0, nl + 1]
    stops = np.r_[nl, len(arr)]
    s = starts[stops > starts]
    return s[~np.isin(arr[np.minimum(s, len(arr) - 1)], (32, 44, 9, 13))] + start


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
