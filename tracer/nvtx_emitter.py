"""NVTX start/end ranges for every recorded phase (domain ``ringscope``, one category per phase).

Start/end ranges (not push/pop) because a range may end on another thread (an op submitted on the
framework thread finishes on the engine's). The byte count, when known, is the range's int payload.
Without CUDA and Nsight the ``nvtx`` package's calls are no-ops, so the emitter can also keep a log of
what it forwarded (``log``), which is how the tests check that each phase produced its range.
"""
from __future__ import annotations

import os
import sys

DOMAIN = "ringscope"


class NvtxEmitter:
    """Forwards ranges to ``nvtx`` (a module with ``start_range``/``end_range``)."""

    domain = DOMAIN

    def __init__(self, nvtx_module, log: list | None = None):
        self._start = nvtx_module.start_range
        self._end = nvtx_module.end_range
        self._mark = getattr(nvtx_module, "mark", None)
        self.log = log   # when a list: ("start", n, domain, category, message, payload) / ("end", n)

    def start(self, message: str, category: str, payload=None):
        """Open a range; returns the handle to pass to :meth:`end`."""
        if payload is not None and not isinstance(payload, int):
            payload = None
        handle = self._start(message=message, domain=DOMAIN, category=category, payload=payload)
        log = self.log
        if log is not None:
            n = len(log)
            log.append(("start", n, DOMAIN, category, message, payload))
            return (n, handle)
        return handle

    def mark(self, message: str) -> None:
        """An instant NVTX mark; the tracer marks ``ringscope rank=N size=M`` once per file so that an
        Nsight report can be mapped to its rank."""
        if self._mark is not None:
            self._mark(message=message, domain=DOMAIN)
        if self.log is not None:
            self.log.append(("mark", len(self.log), DOMAIN, message))

    def end(self, handle) -> None:
        log = self.log
        if log is not None:
            n, handle = handle
            log.append(("end", n))
        if handle is not None:
            self._end(handle)


def tool_attached(nvtx_module) -> bool:
    """Whether an NVTX tool (Nsight Systems' injection library) is attached to this process: the
    ``nvtx`` package hands out a dummy domain, whose calls do nothing, when none is."""
    get_domain = getattr(nvtx_module, "get_domain", None)
    if get_domain is None:
        return True   # an nvtx without the domain API: cannot tell, so emit
    return hasattr(get_domain(DOMAIN), "handle")


def load_emitter(enabled: bool = True, force: bool = False) -> NvtxEmitter | None:
    """An emitter when NVTX is wanted, the ``nvtx`` package imports and a tool is attached to
    receive the ranges (``force``: even with no tool, e.g. to check the calls), else None.
    Without a tool every NVTX call is a no-op, so skipping them changes nothing but the cost."""
    if not enabled:
        return None
    try:
        import nvtx  # optional: the nvtx extra
    except ImportError:
        if os.environ.get("NVTX_INJECTION64_PATH"):   # set by Nsight Systems in the process it profiles
            print("ringscope: Nsight Systems is attached but the nvtx package is missing, so the timeline's NVTX "
                  "ranges are off: pip install 'ringscope[nvtx]'", file=sys.stderr)
        return None
    if not force and not tool_attached(nvtx):
        return None
    return NvtxEmitter(nvtx)
