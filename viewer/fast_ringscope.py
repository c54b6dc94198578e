"""Fast columnar parse of a ringscope trace (one event per line) with pyarrow's JSON reader.

The event lines are turned into newline-delimited JSON and read by Arrow in C++ against an explicit
schema of the fields the viewer uses; tables are then built with vectorised pandas. Anything unusual
(events sharing a line, odd types, corrupt middle) raises :class:`Fallback` and the caller uses the
per-event Python parser instead, which yields the same tables.
"""
from __future__ import annotations

class Fallback(Exception):
    """The fast path cannot read this file; use the Python parser."""


def _schema():
    import pyarrow as pa

    i, s, f = pa.int64(), pa.string(), pa.float64()
    args = pa.struct([("tensor", s), ("step", i), ("response", i), ("bytes", i), ("op", s), ("dtype", s),
                      ("process_set", i), ("rank", i), ("tensors", pa.list_(s)), ("count", i),
                      ("threshold", i), ("backend", s), ("size", i), ("cycle", i), ("value", f),
                      ("clock_offset_ns", i), ("clock_offset_uncertainty_ns", i), ("events_dropped", i), ("error", s)])
    return pa.schema([("ph", s), ("name", s), ("cat", s), ("pid", i), ("tid", i), ("ts", f), ("dur", f),
                      ("id", s), ("id2", pa.struct([("local", s), ("global", s)])), ("args", args)])


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
        idx = np.flatnonzero((w[:-1] == 44) & (w[1:] == 10))
        out.append(idx + lo)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def read_columns(reader):
    """Arrow-parsed events as a flat pandas DataFrame (plus closed, dropped, stop_offset).

    The event lines are made newline-delimited in place (each line's trailing comma becomes a space)
    and handed to Arrow without a copy; on failure the commas are put back for the Python parser.
    """
    import pyarrow as pa
    import pyarrow.json as pj

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
        tbl = pj.read_json(pa.BufferReader(pa.py_buffer(view)),
                           read_options=pj.ReadOptions(use_threads=False, block_size=1 << 23),
                           parse_options=pj.ParseOptions(explicit_schema=_schema(),
                                                         unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        arr[seps] = 44
        if trail is not None:
            buf[trail] = 44
        raise Fallback(str(exc)) from None
    finally:
        try:
            view.release()
        except BufferError:  # still exported to Arrow; freed with it
            pass
    flat = tbl.flatten().flatten()
    del tbl
    # column by column, freeing Arrow's copy as each is converted (peak: one copy, not two)
    df = flat.to_pandas(types_mapper=_types_mapper, self_destruct=True, split_blocks=True)
    del flat
    pa.default_memory_pool().release_unused()
    return df, closed, dropped, stop


def _np_view(buf):
    import numpy as np

    return np.frombuffer(buf, dtype=np.uint8)


def _last_comma(buf, start, end):
    i = end - 1
    while i > start and buf[i] in b" \t\r\n":
        i -= 1
    return i if buf[i] == 44 else None


def _types_mapper(t):
    import pandas as pd
    import pyarrow as pa

    if t == pa.string():
        return pd.StringDtype("pyarrow")
    if t == pa.int64():
        return pd.Int64Dtype()
    return None


def pid_of(df):
    """First pid in the file (the rank when the metadata lacks it)."""
    if df is None or "pid" not in df or not df["pid"].notna().any():
        return None
    return int(df["pid"].dropna().iloc[0])

