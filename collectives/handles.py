"""Handles returned by async ops: ``poll`` without blocking, ``wait`` for the result or the error.

:class:`Handle` is the native core's (collectives/core/handle.c): a waiting thread sleeps on it with
the GIL released, and the engine finishes it from C.
"""
from __future__ import annotations

from collectives._core import Handle, set_error_type

__all__ = ["CollectiveError", "GroupHandle", "Handle"]


class CollectiveError(RuntimeError):
    """A collective failed on this rank (mismatch across ranks, stall, shutdown, backend error)."""


set_error_type(CollectiveError)   # what Handle.wait raises


class GroupHandle:
    """One handle for a grouped op: ``poll`` is true when every member finished; ``wait`` returns
    the list of results (raising the first error)."""

    __slots__ = ("handles", "name")

    def __init__(self, handles, name):
        self.handles = list(handles)
        self.name = name

    def poll(self) -> bool:
        return all(h.poll() for h in self.handles)

    def wait(self, timeout: float | None = None):
        return [h.wait(timeout) for h in self.handles]
