"""What ``ringscope merge ... --nsys SPEC`` adds to the merged trace (called by viewer.cli.merge)."""
from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    """The ``--nsys`` option: ``--nsys REPORT.sqlite [...]`` and/or ``--nsys RANK=FILE [...]``."""
    parser.add_argument(
        "--nsys", nargs="+", action="extend", metavar="REPORT.sqlite|RANK=FILE", default=None,
        help="overlay GPU kernels from Nsight Systems SQLite exports (nsys export --type sqlite); "
             "processes map to ranks by ringscope's NVTX marks or pids, or explicitly as RANK=FILE")


def gpu_extra_events(paths, specs, plan) -> list[dict]:
    """The merged trace's GPU lanes (on the plan's clock), each rank's alignment reported."""
    from viewer import Run  # pandas loads only when --nsys is given
    from viewer.nsys.attach import attach_nsys
    from viewer.nsys.overlay import chrome_events

    run = Run.load(paths)
    ov = attach_nsys(run.tables, specs)
    for w in ov.warnings:
        print(f"ringscope: warning: {w}", file=sys.stderr)
    for line in ov.report_lines():
        print(f"nsys {line}", file=sys.stdout)
    origin = run.meta.get("origin_epoch_ns")
    shift = 0 if origin is None or plan.origin_epoch_ns is None else plan.origin_epoch_ns - origin
    return chrome_events(ov.aligned, ts_origin_ns=shift)
