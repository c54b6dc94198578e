"""A response's own lines as it runs: the Python twin of ``tracer._oplines.Note``.

The runtime's executor opens the note when a response starts, marks its memcpy phases, enters a
span per backend phase, and the completion of the response's ops closes it. This twin writes each
line live, through the recorder's ``begin``/``end``/``span``/``counter`` (so NVTX ranges get their
moments); the C Note only reads the clock then, and writes every line in the completion's call.
"""
from __future__ import annotations

from contextlib import nullcontext

from tracer import vocab as V

_IDLE = nullcontext()
_MEMCPY = (V.MEMCPY_IN_FUSION_BUFFER, V.MEMCPY_OUT_FUSION_BUFFER)


class ResponseNote:
    """``open(args, t_response, size)``, ``mark(i)``, ``span(name, nbytes, backend)``, ``close()`` and
    ``times``, as ``tracer._oplines.Note`` has them (see :mod:`collectives.executor`)."""

    def __init__(self, rec):
        self.rec = rec
        self._tok = self._mem = self._args = self._size = None
        self.times = (None, None)

    def open(self, args, t_response, size) -> None:
        """A response starts now; ``args`` are its FUSED_RESPONSE's (queue_ns added here)."""
        if self._args is not None:
            self.close()
        rec = self.rec
        t_deq = rec.now()
        if t_response is not None:
            args[V.ARG_QUEUE_NS] = t_deq - t_response
        self._args, self._size, self.times = args, size, (t_response, t_deq)
        self._tok = rec.begin(V.TID_FUSION, V.FUSED_RESPONSE, V.CAT_FUSION, args, ts_ns=t_deq)

    def mark(self, i: int) -> None:
        """Now: memcpy into the fusion buffer begins (0) or ends (1, with the fill counter), out of
        it begins (2) or ends (3)."""
        a = self._args
        if a is None:
            return
        if i % 2 == 0:
            self._mem = self.rec.begin(V.TID_FUSION, _MEMCPY[i // 2], V.CAT_MEMCPY,
                                       {V.ARG_RESPONSE: a[V.ARG_RESPONSE]})
            return
        tok, self._mem = self._mem, None
        self.rec.end(tok)
        if i == 1:
            self.rec.counter(V.COUNTER_FUSION_FILL, a[V.ARG_BYTES])

    def span(self, name: str, nbytes: int, backend: str):
        """A backend phase's span, as a context manager."""
        a = self._args
        if a is None:
            return _IDLE
        return self.rec.span(V.TID_BACKEND, name, V.CAT_COMM, {
            V.ARG_RESPONSE: a[V.ARG_RESPONSE], V.ARG_BYTES: int(nbytes),
            V.ARG_BACKEND: backend, "size": self._size,
            V.ARG_PROCESS_SET: a[V.ARG_PROCESS_SET], V.ARG_STEP: a[V.ARG_STEP]})

    def close(self) -> None:
        """The response's span ends now (nothing when none is open)."""
        tok, self._tok, self._args, self._mem = self._tok, None, None, None
        self.times = (None, None)
        if tok is not None:
            self.rec.end(tok)
