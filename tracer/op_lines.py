"""The op-level line functions (:mod:`tracer.op_lines_py`): the C build, ``tracer._oplines``, when
it is importable, else the pure-Python twin. ``RINGSCOPE_PURE_PYTHON=1`` forces the twin (for
comparing the two). ``IMPL`` says which one is in use ("c" or "python")."""
from __future__ import annotations

import os

from tracer import op_lines_py as _py
from tracer import recorder as _recorder

begins, ends, ready, chunk = _py.begins, _py.ends, _py.ready, _py.chunk
ready_held, Completions, Stamper = _py.ready_held, _py.Completions, _py.Stamper
Spans = None   # begin/end/counter(s) in C; the twin is TimelineRecorder's own methods
Lines = None   # lines formatted where recorded, in C; the twin leaves records to the writer
Note = None    # a response's lines noted, written at once, in C; the twin: response_note
IMPL = "python"
if os.environ.get("RINGSCOPE_PURE_PYTHON", "") in ("", "0"):
    try:
        from tracer import _oplines as _c
    except ImportError:
        pass
    else:
        begins, ends, ready, chunk = _c.begins, _c.ends, _c.ready, _c.chunk
        ready_held, Completions, Spans = _c.ready_held, _c.Completions, _c.Spans
        Stamper, Lines, Note = _c.Stamper, _c.Lines, _c.Note
        IMPL = "c"


def stamper():
    """A new :class:`Stamper` over the process-wide recorder (the runtime keeps one)."""
    return Stamper(vars(_recorder))
