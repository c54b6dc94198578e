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


class UnreadableTraceWarning(UserWarning):
    """A run's trace that cannot be read, or a rank with none: left out, the others analysed."""


def describe_skipped(skipped: list, limit: int = 3) -> str:
    """``3 damaged line(s), 4 event(s) lost: line 102 (why), ...`` for a file's skipped lines."""
    events = sum(s["events"] for s in skipped)
    where = "; ".join((f"line {s['line']} " if s.get("line") else "") + f"({s['reason']})"
                      for s in skipped[:limit])
    more = f"; {len(skipped) - limit} more" if len(skipped) > limit else ""
    return f"{len(skipped)} damaged line(s), {events} event(s) lost: {where}{more}"


def warn_damage(path, meta: dict, closed: bool) -> None:
    """One loaded file's warnings, from ``meta``'s ``_`` keys: cut or unfinished, and its damaged lines."""
    skipped, damage = meta.get("_skipped") or [], meta.get("_damage")
    if damage:
        warnings.warn(TruncatedTraceWarning(f"{path}: {damage}; the rest of the file is lost"), stacklevel=3)
    elif not closed:   # stopped mid-event, or all of it read but never closed
        at, size, n = meta.get("_stop_offset", 0), meta.get("_size", 0), meta.get("_n_events", 0)
        warnings.warn(TruncatedTraceWarning(
            f"{path}: truncated trace, stopped at byte {at} of {size}; recovered {n} complete events" if at < size
            else f"{path}: unfinished trace (the job was killed or crashed before closing it); read all {n} events"),
            stacklevel=2)
    if skipped:
        warnings.warn(TruncatedTraceWarning(f"{path}: {describe_skipped(skipped)}"), stacklevel=3)


def show_warnings_on_stderr() -> None:
    """Print viewer warnings as plain one-liners (for the CLI), each message once."""
    def _show(message, category, filename, lineno, file=None, line=None):
        print(f"ringscope: warning: {message}", file=sys.stderr)

    warnings.showwarning = _show
    warnings.simplefilter("default", TruncatedTraceWarning)
