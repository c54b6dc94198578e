"""Turning buffered records into Chrome-trace events, and the file's fixed head and tail.

A record is the tuple the recorder's hot path appends::

    (ph, key, name, cat, t0_ns, t1_or_value, args, step, extra_args)

``ph`` is X (key = tid, t1 = end ns), i (key = tid), b/e (key = async id), C (t1 = value).
Times are ``time.perf_counter_ns()``; events get ``ts``/``dur`` in µs relative to the rank's base
(integer ns / 1000, so exactly three decimals and no rounding that could break nesting).
"""
from __future__ import annotations

try:
    import orjson

    def dumps(obj) -> bytes:
        return orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)
except ImportError:  # pragma: no cover - orjson is a declared dependency of the viewer extra
    import json

    def dumps(obj) -> bytes:
        return json.dumps(obj, separators=(",", ":"), default=str).encode()

from tracer import vocab

_SEP = b'},{"name":'


def dumps_many(events: list[dict]) -> list[bytes]:
    """One line per event, serialised with a single ``dumps`` call (per-call overhead dominates for
    small events). Every event dict starts with its "name" key, so the array splits at ``},{"name":``;
    quotes inside strings are escaped, so only a nested object could fake a boundary, and then the
    count disagrees and each event is serialised on its own."""
    if len(events) < 2:
        return [dumps(e) for e in events]
    parts = dumps(events)[1:-1].split(_SEP)
    if len(parts) != len(events):
        return [dumps(e) for e in events]
    out = [parts[0] + b"}"]
    out += [b'{"name":' + p + b"}" for p in parts[1:-1]]
    out.append(b'{"name":' + parts[-1])
    return out


HEAD_PREFIX = b'{"otherData": {"ringscope": '
HEAD_SUFFIX = b'\n"traceEvents": [\n'
TAIL = b"\n]}\n"
MIN_HEAD_ROOM = 4096   # bytes reserved for the metadata line, so it can be rewritten in place


def head_line(meta: dict, width: int | None = None) -> bytes:
    """The first line: the metadata object, padded with spaces to ``width`` bytes (if given)."""
    line = HEAD_PREFIX + dumps(meta) + b"},"
    if width is not None:
        if len(line) > width:
            raise ValueError("metadata grew past the reserved head room")
        line = line + b" " * (width - len(line))
    return line


def head_width(meta: dict) -> int:
    return max(MIN_HEAD_ROOM, 2 * len(head_line(meta)))


def metadata_events(pid: int, meta: dict) -> list[dict]:
    """process_name/sort_index and thread_name/sort_index events for one rank."""
    host = meta.get("host") or "?"
    evs = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
         "args": {"name": f"rank {meta.get('rank', pid)} ({host})"}},
        {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
         "args": {"sort_index": int(meta.get("rank", pid))}},
    ]
    for tid, tname in vocab.THREAD_NAMES.items():
        evs.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": tname}})
        evs.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                    "args": {"sort_index": tid}})
    return evs


def _args(args, step, extra):
    a = dict(args) if args else {}
    if extra:
        a.update(extra)
    if vocab.ARG_STEP not in a:
        a[vocab.ARG_STEP] = step
    return a


def to_event(rec: tuple, pid: int, base_ns: int) -> dict:
    """One Chrome-trace event dict from one buffered record."""
    ph, key, name, cat, t0, t1, args, step, extra = rec
    if ph == "X":
        return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": key,
                "ts": (t0 - base_ns) / 1000, "dur": (t1 - t0) / 1000, "args": _args(args, step, extra)}
    if ph == "b" or ph == "e":
        return {"name": name, "cat": vocab.CAT_TENSOR, "ph": ph, "pid": pid, "tid": vocab.TID_FRAMEWORK,
                "ts": (t0 - base_ns) / 1000, "id2": {"local": key}, "args": _args(args, step, extra)}
    if ph == "C":
        return {"name": name, "cat": vocab.CAT_COUNTER, "ph": "C", "pid": pid, "tid": 0,
                "ts": (t0 - base_ns) / 1000, "args": {"value": t1}}
    return {"name": name, "cat": cat, "ph": "i", "s": "t", "pid": pid, "tid": key,
            "ts": (t0 - base_ns) / 1000, "args": _args(args, step, extra)}
