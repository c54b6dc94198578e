"""JSON serialisation (orjson when present) and the trace file's fixed head, tail and metadata
events. The event lines themselves are built by :mod:`tracer.lines`."""
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


def thread_events(pid: int, tid: int, name: str) -> list[dict]:
    """The thread_name and thread_sort_index events of one thread."""
    return [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}},
            {"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}}]


def metadata_events(pid: int, meta: dict, threads: dict | None = None) -> list[dict]:
    """process_name/sort_index events for one rank, and thread_name/sort_index events for its
    fixed threads and for ``threads`` ({tid: name}: the other OS threads named so far)."""
    host = meta.get("host") or "?"
    evs = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
         "args": {"name": f"rank {meta.get('rank', pid)} ({host})"}},
        {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
         "args": {"sort_index": int(meta.get("rank", pid))}},
    ]
    for tid, tname in {**vocab.THREAD_NAMES, **(threads or {})}.items():
        evs += thread_events(pid, tid, tname)
    return evs
