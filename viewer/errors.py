"""Errors and warnings the viewer reports to users (one line each, naming the file)."""
from __future__ import annotations

import sys
import warnings


class TraceError(ValueError):
    """Input that cannot be read as a trace. ``str(err)`` is a one-line message naming the file."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class TruncatedTraceWarning(UserWarning):
    """A trace ended in the middle of an event; every complete event before it was kept."""


def warn_truncated(path, offset: int, size: int, n_events: int) -> None:
    """Warn once per file that it stopped at byte ``offset`` (or, when the whole file was read, that
    the job never closed it)."""
    if offset < size:
        msg = (f"{path}: truncated trace, stopped at byte {offset} of {size}; "
               f"recovered {n_events} complete events")
    else:
        msg = (f"{path}: unfinished trace (the job was killed or crashed before closing it); "
               f"read all {n_events} events")
    warnings.warn(TruncatedTraceWarning(msg), stacklevel=3)


def show_warnings_on_stderr() -> None:
    """Print viewer warnings as plain one-liners (for the CLI), each message once."""
    def _show(message, category, filename, lineno, file=None, line=None):
        print(f"ringscope: warning: {message}", file=sys.stderr)

    warnings.showwarning = _show
    warnings.simplefilter("default", TruncatedTraceWarning)
