"""A rank that fails must not leave the others hanging: print, close the timeline, MPI Abort."""
from __future__ import annotations

import os
import sys
import traceback

_installed = False
_previous_hook = None


def abort(code: int = 1) -> None:
    """Close the timeline and abort the whole MPI job (mpiexec then ends every rank)."""
    try:
        import tracer
        tracer.close()
    except Exception:
        pass
    sys.stderr.flush()
    sys.stdout.flush()
    try:
        from mpi4py import MPI
        MPI.COMM_WORLD.Abort(code)
    finally:
        os._exit(code)


def _is_user_error(exc) -> bool:
    from collectives.config import ConfigError
    try:
        from tracer import TimelineConfigError
    except ImportError:
        TimelineConfigError = ConfigError
    return isinstance(exc, (ConfigError, TimelineConfigError))


def _hook(exc_type, exc, tb):
    try:
        from mpi4py import MPI
        rank = MPI.COMM_WORLD.Get_rank()
    except Exception:
        rank = "?"
    if _is_user_error(exc):   # bad settings: one clear line, no traceback
        sys.stderr.write(f"ringscope: rank {rank}: {exc}\n")
    else:
        sys.stderr.write(f"[ringscope] rank {rank} raised an uncaught exception; aborting the job\n")
        traceback.print_exception(exc_type, exc, tb)
    if issubclass(exc_type, KeyboardInterrupt):
        abort(130)
    abort(1)


def install() -> None:
    """Route uncaught exceptions on the main thread (and other threads) to :func:`abort`."""
    global _installed, _previous_hook
    if _installed:
        return
    import threading
    _previous_hook = sys.excepthook
    sys.excepthook = _hook
    threading.excepthook = lambda args: _hook(args.exc_type, args.exc_value, args.exc_traceback)
    _installed = True


def uninstall() -> None:
    global _installed
    if _installed:
        import threading
        sys.excepthook = _previous_hook or sys.__excepthook__
        threading.excepthook = threading.__excepthook__
        _installed = False
