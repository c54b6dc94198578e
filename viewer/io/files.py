"""Which files of a directory are traces, and of which format: sniffed from their first bytes (gunzipped
when needed)."""
from __future__ import annotations

import zlib
from pathlib import Path

TRACE_SUFFIXES = (".json", ".json.gz", ".trace", ".trace.gz")
_SNIFF = 65536
_KINETO_MARKS = (b'"schemaVersion"', b'"distributedInfo"', b'"deviceProperties"', b'"baseTimeNanoseconds"',
                 b'"cpu_op"', b'"cuda_runtime"', b'"ProfilerStep#', b'"PyTorch Profiler')   # torch.profiler's


def first_bytes(f: Path) -> bytes:
    """The first bytes of a file, gunzipped when needed (a truncated .gz still gives its start)."""
    try:
        with open(f, "rb") as fh:
            raw = fh.read(_SNIFF)
    except OSError:
        return b""
    if raw[:2] == b"\x1f\x8b":
        try:
            return zlib.decompressobj(wbits=47).decompress(raw, _SNIFF)
        except zlib.error:
            return b""
    return raw


def _looks_like_trace(f: Path) -> bool:
    """Cheap sniff so a run directory may also hold summaries or merged traces."""
    h = first_bytes(f)
    first = h.lstrip()[:1]
    return b'"ringscope_merged"' not in h and (first == b"[" or first == b"{" and b'"traceEvents"' in h)


def trace_files(d: Path) -> list[Path]:
    """The trace files directly inside directory ``d``, then those of its ``kineto/`` (hvd.timeline.profile)."""
    files = []
    for where in (d, d / "kineto"):
        if where.is_dir():
            files += sorted(f for f in where.iterdir() if f.is_file() and f.name.endswith(TRACE_SUFFIXES)
                            and _looks_like_trace(f))
    return files


def detect_format(path) -> str:
    """"ringscope", "horovod", "kineto" or "merged", sniffed from the first bytes of a file."""
    head = first_bytes(Path(path))
    if b'"ringscope_merged"' in head:
        return "merged"
    if b'"otherData"' in head and b'"ringscope"' in head:
        return "ringscope"
    if b"start_time_since_epoch_in_micros" in head or b'"CYCLE_START"' in head:
        return "horovod"
    if b'"NEGOTIATE_' in head and b'"tid"' not in head:
        return "horovod"
    return "kineto" if any(k in head for k in _KINETO_MARKS) else "ringscope"
