"""One Kineto trace through ringscope's reader in a fresh interpreter: ``BENCH_JSON`` with wall and
CPU seconds, events, and peak memory above the interpreter with its imports loaded.

    python bench/kineto_probe.py TRACE
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _status(key: str) -> int:
    """A /proc/self/status size in bytes (VmHWM, unlike ru_maxrss, starts afresh at exec: a parent's
    size at fork does not leak into it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _warm_up() -> None:
    """Parse a tiny Kineto trace first: every lazy import is then loaded, and is not the parse's memory."""
    import tempfile

    from viewer.kineto.tables import parse_file

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "rank0.pt.trace.json"
        p.write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, '
                     '"tid": 1, "ts": 1.0, "dur": 2.0, "args": {}}]}')
        parse_file(p, warn=False)


def main() -> None:
    from bench.launch import emit
    from viewer import memory
    from viewer.kineto.tables import parse_file

    memory.use_system_allocator()
    _warm_up()
    base = _status("VmRSS")
    t0, c0 = time.perf_counter(), time.process_time()
    out = parse_file(sys.argv[1], warn=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _status("VmHWM")
    emit({"wall_s": wall, "cpu_s": cpu, "events": len(out["events"]), "peak_above_imports": peak - base,
          "collectives": len(out["fused_ops"])})


if __name__ == "__main__":
    main()
