"""Fast columnar parse of a ringscope trace (one event per line) with pyarrow's JSON reader.

The event lines are turned into newline-delimited JSON and read by Arrow in C++ against an explicit
schema of the fields the viewer uses; the tables are then built with numpy over the columns
(:mod:`viewer.fast_tables`). Anything unusual (events sharing a line, odd types, corrupt middle)
raises :class:`Fallback` and the caller uses the per-event Python parser instead, which yields the
same tables.
"""
from __future__ import annotations

class Fallback(Exception):
    """The fast path cannot read this file; use the Python parser."""


def _schema(with_pid: bool, all_ids: bool):
    """The fields the tables use. ``pid`` only when the metadata lacks the rank; async ids other than
    ``id2.local`` (the tracer's) only when some async event lacks it; SHUTDOWN's own arguments are
    read from its line (:func:`_shutdown_args`): every field costs the reader time on every row."""
    import pyarrow as pa

    i, s, f = pa.int64(), pa.string(), pa.float64()
    args = pa.struct([("tensor", s), ("step", i), ("response", i), ("bytes", i), ("op", s), ("dtype", s),
                      ("process_set", i), ("rank", i), ("tensors", pa.list_(s)), ("count", i),
                      ("threshold", i), ("backend", s), ("size", i), ("cycle", i), ("value", f), ("error", s),
                      ("queue_ns", i)])
    fields = [("ph", s), ("name", s), ("cat", s), ("tid", i), ("ts", f), ("dur", f), ("args", args)]
    fields.append(("id2", pa.struct([("local", s), ("global", s)] if all_ids else [("local", s)])))
    if all_ids:
        fields.append(("id", s))
    if with_pid:
        fields.append(("pid", i))
    return pa.schema(fields)


def _read(view, schema):
    import pyarrow as pa
    import pyarrow.json as pj

    tbl = pj.read_json(pa.BufferReader(pa.py_buffer(view)),
                       read_options=pj.ReadOptions(use_threads=False, block_size=1 << 20),
                       parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"))
    return tbl.flatten().flatten()


def _lacks_local_ids(flat) -> bool:
    """Some async (b/e) event has no ``id2.local``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    asy = pc.is_in(flat.column("ph"), value_set=pa.array(["b", "e"]))
    return bool(pc.any(pc.and_(asy, pc.is_null(flat.column("id2.local")))).as_py())


def _shutdown_args(buf, start: int, end: int):
    """The args of the last SHUTDOWN span or instant among the event lines, from its line (None when
    there is none)."""
    from tracer import vocab as V
    from viewer.jsonstream import loads

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
        except Exception:  # noqa: BLE001 - the name inside some other text: look further back
            ev = None
        if isinstance(ev, dict) and ev.get("name") == V.SHUTDOWN and ev.get("ph") in ("X", "i", "I", "n"):
            args = ev.get("args")
            out = {}
            for k in ("clock_offset_ns", "clock_offset_uncertainty_ns", "events_dropped"):
                v = args.get(k) if isinstance(args, dict) else None
                if v is None:
                    continue
                if v.__class__ is not int:
                    raise Fallback(f"SHUTDOWN {k} is not an integer")
                out[k] = v
            return out
        hi = pos


def _bounds(reader):
    """(start, end, closed, dropped, stop_offset) of the event lines inside ``reader.data``."""
    from viewer.jsonstream import loads

    data, start = reader.data, reader._start
    n = len(data)
    tail = bytes(data[max(start, n - 256):]).rstrip()
    if reader.form == "object" and tail.endswith(b"}"):
        end = data.rfind(b"]", max(start, n - 256))
        if end < 0 or bytes(data[end + 1:]).strip() != b"}":
            raise Fallback("object tail with extra keys")
        return start, end, True, False, n
    if reader.form == "array" and tail.endswith(b"]"):
        return start, data.rfind(b"]"), True, False, n
    nl = data.rfind(b"\n", start)
    if nl < 0:
        raise Fallback("single line")
    rest = bytes(data[nl + 1:]).strip()
    if not rest:
        return start, nl, False, False, n
    try:
        loads(rest.rstrip(b","))
        return start, n, False, False, n  # the last line is complete, just unterminated
    except Exception:
        return start, nl, False, True, nl + 1


def _separators(buf, start, end):
    """Positions of the "," that end each event line (",\n"), found in 4 MiB windows."""
    import numpy as np

    arr = np.frombuffer(buf, dtype=np.uint8)
    out = []
    step = 4 << 20
    for lo in range(start, end, step):
        hi = min(lo + step, end - 1)
        if hi <= lo:
            break
        w = arr[lo:hi + 1]
        idx = np.flatnonzero(w[1:] == 10)   # newlines are few: test the byte before each one
        out.append(idx[w[idx] == 44] + lo)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def read_columns(reader, with_pid: bool = True):
    """Arrow-parsed events as :class:`viewer.fast_columns.Columns` (plus closed, dropped, stop_offset).

    The event lines are made newline-delimited in place (each line's trailing comma becomes a space)
    and handed to Arrow without a copy; on failure the commas are put back for the Python parser.
    """
    import pyarrow as pa

    start, end, closed, dropped, stop = _bounds(reader)
    buf = reader.data
    if not isinstance(buf, bytearray):
        raise Fallback("immutable buffer")
    seps = _separators(buf, start, end)
    view = memoryview(buf)[start:end]
    if not bytes(view[:4096]).strip():
        return None, closed, dropped, stop
    arr = _np_view(buf)
    arr[seps] = 32
    last = bytes(view[-64:]).rstrip()
    trail = None
    if last.endswith(b","):  # an unclosed file's final separator has no newline after it
        trail = _last_comma(buf, start, end)
        if trail is not None:
            buf[trail] = 32
    try:
        flat = _read(view, _schema(with_pid, all_ids=False))
        if _lacks_local_ids(flat):  # async ids written as id2.global or a plain id: read those too
            flat = _read(view, _schema(with_pid, all_ids=True))
        shutdown = _shutdown_args(buf, start, end)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, Fallback) as exc:
        arr[seps] = 44
        if trail is not None:
            buf[trail] = 44
        raise Fallback(str(exc)) from None
    finally:
        try:
            view.release()
        except BufferError:  # still exported to Arrow; freed with it
            pass
    from viewer.fast_columns import Columns

    cols = Columns(flat)
    cols.shutdown = shutdown
    return cols, closed, dropped, stop


def _np_view(buf):
    import numpy as np

    return np.frombuffer(buf, dtype=np.uint8)


def _last_comma(buf, start, end):
    i = end - 1
    while i > start and buf[i] in b" \t\r\n":
        i -= 1
    return i if buf[i] == 44 else None


def pid_of(cols):
    """First pid in the file (the rank when the metadata lacks it)."""
    if cols is None:
        return None
    pid, ok = cols.ints("pid", 0)
    first = ok.argmax() if len(ok) else 0
    return int(pid[first]) if len(ok) and ok[first] else None
