"""``ringscope summarize RUN_DIR|FILES [--full] [--json] [--csv DIR] [--breakdown] [--top N] [--peak-busbw GBPS]``."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

# The viewer's modules load inside main, once the arguments parse: --help and a bad argument answer
# without pandas; rich only when tables are drawn.

PROGRESS_BYTES = 32 << 20  # show a progress bar when the traces total more than this


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ringscope summarize",
                                description="Summarize a run: findings, stragglers, fusion, bandwidth.")
    p.add_argument("paths", nargs="+", help="a run directory, or trace files (ringscope or Horovod), or a "
                   "folder of torch Flight Recorder dumps")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (docs/SUMMARY_JSON.md)")
    p.add_argument("--full", action="store_true",
                   help="print the run's facts, every finding's detail and fix, and every table")
    p.add_argument("--csv", metavar="DIR", help="also write every analysis table as DIR/<name>.csv")
    p.add_argument("--breakdown", action="store_true",
                   help="also show where each rank's every step went (JSON: breakdown_steps)")
    p.add_argument("--top", type=int, default=10, metavar="N", help="rows per table (default 10)")
    p.add_argument("--peak-busbw", type=float, metavar="GBPS", help="link peak bus bandwidth (GB/s)")
    p.add_argument("--no-cache", action="store_true", help="parse again, ignoring the parse cache")
    p.add_argument("--cache-dir", metavar="DIR", help="where the parse cache lives")
    p.add_argument("--scheduler", metavar="ADDRESS", help="parse on a Dask cluster: its scheduler (tcp://host:8786), "
                   "or 'local' for one on this machine; the traces and the store on shared storage (docs/CLUSTER.md)")
    return p


def _load(args):
    from viewer.loader import find_traces
    from viewer.run import Run

    files = [f for p in args.paths for f in find_traces(p)]
    total = sum(f.stat().st_size for f in files)
    src = args.paths[0] if len(args.paths) == 1 else files
    if total < PROGRESS_BYTES or args.json or not sys.stderr.isatty():
        return Run.load(src, cache=not args.no_cache, cache_dir=args.cache_dir)
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

    with Progress(TextColumn("loading {task.description}"), BarColumn(), DownloadColumn(),
                  transient=True) as prog:
        task = prog.add_task(f"{len(files)} trace(s)", total=total)
        return Run.load(src, cache=not args.no_cache, cache_dir=args.cache_dir,
                        progress=lambda done, tot, f: prog.update(task, completed=done))


def main(argv=None) -> int:
    """Entry point; returns the exit code (2 on bad input, with one line on stderr)."""
    args = _parser().parse_args(argv)
    if args.scheduler:
        from viewer import parse_dask
        os.environ[parse_dask.ENV] = args.scheduler   # the loader's parse reads it, as when set by hand
    from viewer.errors import TraceError, show_warnings_on_stderr

    show_warnings_on_stderr()
    if len(args.paths) == 1:
        from viewer import flight_recorder as fr
        if fr.is_dump_dir(args.paths[0]):
            return _flight_recorder(args.paths[0], args.json)
    from viewer import memory
    memory.use_system_allocator()
    try:
        run = _load(args)
    except TraceError as exc:
        print(f"ringscope: {exc}", file=sys.stderr)
        return 2
    from viewer import summary

    if args.csv:
        try:
            summary.write_csv(run, Path(args.csv), args.peak_busbw)
        except OSError as exc:
            print(f"ringscope: {args.csv}: cannot write CSV ({exc.strerror or exc})", file=sys.stderr)
            return 2
    data = summary.build_summary(run, top=args.top, steps=args.breakdown, peak_busbw_gbps=args.peak_busbw)
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return 0
    from viewer.cli import tables

    tables.print_summary(run, data, top=args.top, full=args.full or args.breakdown)
    if args.breakdown:
        tables.print_analyses(run, ["breakdown_steps"], top=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def _flight_recorder(path: str, as_json: bool) -> int:
    """A folder of torch Flight Recorder dumps: who is missing which collective, per process group."""
    from viewer import flight_recorder as fr
    from viewer.errors import TraceError

    try:
        result = fr.analyze(fr.read_dir(path))
    except TraceError as exc:
        print(f"ringscope: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, default=str) if as_json else "\n".join(fr.report(result)))
    return 0
