"""Handles returned by async ops: ``poll`` without blocking, ``wait`` for the result or the error."""
from __future__ import annotations

import _thread

from tracer import get_recorder
from tracer import vocab as V


class CollectiveError(RuntimeError):
    """A collective failed on this rank (mismatch across ranks, stall, shutdown, backend error)."""


class Handle:
    """The pending result of one submitted op."""

    __slots__ = ("name", "_done", "_over", "_result", "_error", "received_splits",
                 "__weakref__")

    def __init__(self, name: str):
        self.name = name
        # held until the op finishes: a bare lock is ~20x cheaper to make and to release than an
        # Event (a Condition), and this runs once per op on each thread
        self._done = _thread.allocate_lock()
        self._done.acquire()
        self._over = False   # finished (set once, by the engine)
        self._result = None
        self._error = None
        self.received_splits: list[int] | None = None   # alltoall: rows received from each rank

    def poll(self) -> bool:
        """True when the op finished (successfully or not); never blocks."""
        return self._over

    def wait(self, timeout: float | None = None):
        """Block (without spinning) until done; return the result or raise CollectiveError."""
        if not self._over:
            rec = get_recorder()
            wait_s = -1 if timeout is None else max(timeout, 0)
            if rec.enabled:
                with rec.span(V.TID_FRAMEWORK, V.SYNCHRONIZE, V.CAT_FRAMEWORK,
                              {V.ARG_TENSOR: self.name, V.ARG_STEP: rec.step}):
                    done = self._done.acquire(True, wait_s)
            else:
                done = self._done.acquire(True, wait_s)
            if done:
                self._done.release()   # stays open for any other waiter
            if not done:
                raise TimeoutError(f"collective {self.name!r} not finished after {timeout}s")
        if self._error is not None:
            raise CollectiveError(self._error)
        return self._result

    # ---- engine side ------------------------------------------------------------------------
    def set_result(self, value) -> None:
        if self._over:
            return
        self._result = value
        self._over = True
        self._done.release()

    def set_error(self, message: str) -> None:
        if self._over:   # an error after a result (or a second error): the first stands
            return
        self._error = message
        self._over = True
        self._done.release()

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
