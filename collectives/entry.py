"""One submitted op as the engine sees it (framework-neutral; the adapter knows the tensor)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from collectives.ops import ReduceOp


@dataclass(slots=True)
class Entry:
    """A collective request on this rank. ``tensor``/``output`` are framework objects that only
    ``adapter`` touches; ``splits`` are alltoall send counts (first-dimension rows per rank)."""

    name: str | None
    op_type: str
    tensor: Any
    adapter: Any
    reduce_op: ReduceOp = ReduceOp.Sum
    prescale: float = 1.0
    postscale: float = 1.0
    root: int = -1
    splits: list | None = None
    process_set: int = 0
    output: Any = None
    backend: str | None = None
    priority: int = 0   # among ops ready in the same cycle, higher runs first
    # filled by the engine at enqueue
    group: str | None = None
    group_size: int = 0
    handle: Any = None
    submit_ns: int = 0
    nbytes: int = 0
    dtype: str = ""
    shape: tuple = ()
    device: str = "cpu"
    meta: dict = field(default_factory=dict)
    stamp: Any = None   # the tracer's (recorder, step) when recorded (tracer.recorder, OPS)
    # (name, op_type, nbytes, dtype, shape, reduce_op, process_set, priority): immutable, what the
    # tracer keeps of a finished op (never the op or its tensor); may be reused step after step
    trace_key: Any = None
