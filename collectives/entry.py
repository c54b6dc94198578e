"""One submitted op as the engine sees it (framework-neutral; the adapter knows the tensor).

:class:`Entry` is the native core's (collectives/core/entry.c), so that the core reads and fills it
without attribute lookups. ``Entry(name, op_type, tensor, adapter, reduce_op=Sum, prescale=1.0,
postscale=1.0, root=-1, splits=None, process_set=0, output=None, backend=None, priority=0)``:
``tensor``/``output`` are framework objects that only ``adapter`` touches; ``splits`` are alltoall
send counts (first-dimension rows per rank); among ops ready in the same cycle a higher
``priority`` runs first. Filled by the engine at enqueue: ``group``, ``group_size``, ``handle``,
``submit_ns``, ``nbytes``, ``dtype``, ``shape``, ``device``, ``meta``, ``stamp`` (the tracer's
(recorder, step) when recorded) and ``trace_key`` ((name, op_type, nbytes, dtype, shape,
reduce_op, process_set, priority): immutable, what the tracer keeps of a finished op, never the op
or its tensor; it may be reused step after step).
"""
from __future__ import annotations

from collectives._core import Entry

__all__ = ["Entry"]
