"""A rank that fails must not leave the others hanging: print, close the timeline, MPI Abort.

mpi4py.MPI is imported where it is used: importing it starts MPI, which ``collectives.init`` does
first, at the thread level it needs.
"""
from __future__ import annotations

import os
import sys
import time
import traceback

import tracer
from collectives.config import ConfigError
from tracer import TimelineConfigError

ABORT_GRACE_S = 0.3

_installed = False
_previous_hook = None
ON_ABORT: list = []   # callables run first in abort() (an elastic rank says goodbye to its driver)


def abort(code: int = 1) -> None:
    """Close the timeline and abort the whole MPI job (mpiexec then ends every rank)."""
    for fn in ON_ABORT:
        try:
            fn()
        except Exception:
            pass
    try:
        tracer.close()
    except Exception:
        pass
    sys.stderr.flush()
    sys.stdout.flush()
    # mpiexec tears the job down at once on Abort and can drop output its proxy has not forwarded
    # yet; a short pause lets this rank's error reach the user's terminal
    time.sleep(ABORT_GRACE_S)
    try:
        from mpi4py import MPI
        MPI.COMM_WORLD.Abort(code)
    finally:
        os._exit(code)


def _is_user_error(exc) -> bool:
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
    """Route uncaught exceptions of the main thread to :func:`abort`. (Other threads keep
    Python's default: a failing helper thread of the user's should not kill the job; the engine's
    own thread aborts by itself when it fails.)"""
    global _installed, _previous_hook
    if _installed:
        return
    _previous_hook = sys.excepthook
    sys.excepthook = _hook
    _installed = True


def uninstall() -> None:
    global _installed
    if _installed:
        sys.excepthook = _previous_hook or sys.__excepthook__
        _installed = False
