"""Subprocess: time one viewer command in a fresh interpreter; CPU time and peak memory too.

    python bench/analyzer_probe.py summarize RUN_DIR [CACHE_DIR]
    python bench/analyzer_probe.py summarize-nocache RUN_DIR
    python bench/analyzer_probe.py merge RUN_DIR OUT.json
    python bench/analyzer_probe.py read RUN_DIR      (each rank's trace into columns, no tables)
    python bench/analyzer_probe.py baseline          (summarize a one-event Kineto trace: ``after_mb``, the
                                                       RSS with every import a Kineto summary needs)

Imports (viewer, pandas, pyarrow, orjson) are loaded first and timed apart, so the figures are the
command's own work; peak memory is the whole process's ``VmHWM`` (imports included; unlike ``ru_maxrss`` it
starts afresh at exec, so the driver's size when it started the probe does not leak in), with the
RSS after imports reported as the baseline. Prints one ``BENCH_JSON`` line.
"""
from __future__ import annotations

import contextlib
import io
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.launch import emit  # noqa: E402


def _cpu() -> float:
    """CPU seconds of this process (all threads) and of any children it waited for."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def _rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _status_mb(key: str) -> float:
    """A /proc/self/status size (kB there) in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024 / 1e6
    return 0.0


def main() -> int:
    what, args = sys.argv[1], sys.argv[2:]
    t0 = time.perf_counter()
    import orjson  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    if what == "summarize":
        from viewer.cli import summarize as mod
        argv = [args[0], "--json"] + (["--cache-dir", args[1]] if len(args) > 1 else [])
    elif what == "summarize-nocache":
        from viewer.cli import summarize as mod
        argv = [args[0], "--json", "--no-cache"]
    elif what == "load":    # the tables alone (viewer.Run.load), through the given cache dir
        from viewer.run import Run

        class mod:  # noqa: N801  (same shape as the CLI modules)
            @staticmethod
            def main(argv):
                Run.load(argv[0], cache_dir=argv[1])
                return 0
        argv = list(args[:2])
    elif what == "read":    # the reader alone: each file's events into columns
        from viewer.ringscope.reader import read

        class mod:  # noqa: N801
            @staticmethod
            def main(argv):
                for f in sorted(Path(argv[0]).glob("rank-*.json")):
                    read(f)
                return 0
        argv = [args[0]]
    elif what == "baseline":
        import tempfile

        from viewer.cli import summarize as cli

        class mod:  # noqa: N801
            @staticmethod
            def main(argv):
                with tempfile.TemporaryDirectory() as d:
                    p = Path(d) / "rank0.pt.trace.json"
                    p.write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", '
                                 '"pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0, "args": {}}]}')
                    return cli.main([str(p), "--json", "--no-cache"])
        argv = []
    elif what == "merge":
        from viewer.cli import merge as mod
        argv = [args[0], "-o", args[1]]
    else:
        raise SystemExit(f"analyzer_probe: unknown command {what!r}")
    import_s = time.perf_counter() - t0
    base_mb = _rss_mb()
    c0, t1 = _cpu(), time.perf_counter()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = mod.main(argv)
    wall = time.perf_counter() - t1
    cpu = _cpu() - c0
    peak_mb = _status_mb("VmHWM")
    emit({"rc": rc, "wall_s": wall, "cpu_s": cpu, "import_s": import_s, "baseline_mb": base_mb,
          "peak_mb": peak_mb, "after_mb": _rss_mb(), "stdout_bytes": len(out.getvalue())})
    return 0


if __name__ == "__main__":
    sys.exit(main())
