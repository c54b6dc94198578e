"""Handles returned by async ops: ``poll`` without blocking, ``wait`` for the result or the error."""
from __future__ import annotations

import threading

from tracer import get_recorder
from tracer import vocab as V


class CollectiveError(RuntimeError):
    """A collective failed on this rank (mismatch across ranks, stall, shutdown, backend error)."""


class Handle:
    """The pending result of one submitted op."""

    __slots__ = ("name", "_event", "_result", "_error", "received_splits", "__weakref__")

    def __init__(self, name: str):
        self.name = name
        self._event = threading.Event()
        self._result = None
        self._error = None
        self.received_splits = None   # alltoall: rows received from each rank

    def poll(self) -> bool:
        """True when the op finished (successfully or not); never blocks."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None):
        """Block (without spinning) until done; return the result or raise CollectiveError."""
        if not self._event.is_set():
            rec = get_recorder()
            if rec.enabled:
                with rec.span(V.TID_FRAMEWORK, V.SYNCHRONIZE, V.CAT_FRAMEWORK,
                              {V.ARG_TENSOR: self.name, V.ARG_STEP: rec.step}):
                    done = self._event.wait(timeout)
            else:
                done = self._event.wait(timeout)
            if not done:
                raise TimeoutError(f"collective {self.name!r} not finished after {timeout}s")
        if self._error is not None:
            raise CollectiveError(self._error)
        return self._result

    # ---- engine side ------------------------------------------------------------------------
    def set_result(self, value) -> None:
        self._result = value
        self._event.set()

    def set_error(self, message: str) -> None:
        if self._event.is_set():
            return
        self._error = message
        self._event.set()

    @property
    def error(self):
        return self._error


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
