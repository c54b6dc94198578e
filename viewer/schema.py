"""Column contracts of the tables every loader makes. Times are int64 ns since ``meta["origin_epoch_ns"]``,
each rank's clock offset applied (equal ``t_ns`` on two ranks: the same instant). Missing values are NA,
except ``step`` (-1 = unknown) and ``response`` (-1 = none)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

# One row per recorded event (X spans, async b/e pairs joined, instants, counters). Its few-valued strings are
# sorted categoricals: a string costs ~15 bytes a row, a code 1-2, and events are most of a run's memory.
EVENTS = {
    "rank": "int32",
    "thread": "category",    # framework | negotiation | fusion | backend | cycles | tensor | user:<k> | gpu:<stream>
    "name": "category",
    "cat": "category",
    "ph": "category",        # X for spans (async pairs are joined into X), i instant, C counter
    "t_ns": "int64",
    "dur_ns": "int64",       # 0 for instants and counters
    "tensor": "category",    # args.tensor, else the async id (format 3: the name), else NA
    "step": "int64",         # args.step; phases, regions and counters: the STEP span holding them
    "response": "int64",
    "bytes": "Int64",
    "value": "float64",      # counters
    "depth": "int32",        # nesting depth on its thread (0 = outermost)
}

# The formats whose "tensor" thread holds only each tensor op's rows, rebuilt from ``tensor_ops`` by the parser
# (viewer/ringscope/events.py): a Horovod timeline's holds its activities too.
OP_ROWS_THREAD = "tensor"
OP_ROWS_FORMATS = frozenset({"ringscope", "ddp", "fsdp"})

# One row per tensor operation per rank: the lifecycle of one submitted tensor.
TENSOR_OPS = {
    "rank": "int32",
    "tensor": "string",
    "step": "int64",
    "occurrence": "int64",   # n-th op of this tensor name on this rank (0-based; Horovod has no steps)
    "op": "string",          # ALLREDUCE, ...
    "dtype": "string",
    "bytes": "Int64",
    "process_set": "int32",
    "response": "int64",
    "submit_ns": "int64",      # t_ns when the framework submitted it (negotiation start)
    "negotiated_ns": "Int64",  # response received (NA if never: a hang)
    "start_ns": "Int64",       # its fused response started executing (end of QUEUE)
    "done_ns": "Int64",        # result ready (NA if it failed or never ended)
    "end_ns": "Int64",         # the op ended, with its result or its error (NA while still in flight)
    "wait_ns": "Int64",        # framework time blocked in synchronize for it (NA if not waited on)
    "error": "string",         # the op's error (e.g. a stall shutdown); done_ns is then NA, end_ns not
    "priority": "Int64",       # its priority= (higher runs first; NA where the trace has none)
}

# One row per executed response (a fused op) per rank.
FUSED_OPS = {
    "rank": "int32",
    "response": "int64",
    "step": "int64",
    "op": "string",
    "backend": "string",
    "activity": "string",      # e.g. RING_ALLREDUCE, NCCL_ALLREDUCE, MPI_ALLREDUCE
    "dtype": "string",
    "count": "int32",          # tensors fused
    "bytes": "int64",
    "threshold": "Int64",      # fusion threshold in force (bytes)
    "start_ns": "int64",
    "end_ns": "int64",
    "memcpy_in_ns": "int64",   # 0 when not fused
    "memcpy_out_ns": "int64",
    "comm_ns": "int64",        # the backend activity's duration
    "size": "int32",           # ranks taking part
    "tensors": "object",       # list[str]
    "priority": "Int64",       # the highest of its tensors' priorities (NA where the trace has none)
}

# Coordinator's readiness ticks (from our READY instants or Horovod's rank-named X events).
READINESS = {
    "tensor": "string",
    "step": "int64",           # -1 when unknown (Horovod: the n-th occurrence of the tensor name)
    "occurrence": "int64",     # n-th negotiation of this tensor name (0-based)
    "rank": "int32",
    "ready_ns": "int64",
    "source": "string",        # "ringscope" | "horovod"
}

CYCLES = {
    "rank": "int32",
    "cycle": "int64",
    "start_ns": "int64",
    "end_ns": "int64",
}

# One row per rank (per loaded file).
RANKS = {
    "rank": "int32",
    "host": "string",
    "pid": "Int64",
    "local_rank": "Int64",
    "size": "Int64",
    "backend": "string",
    "base_epoch_ns": "Int64",
    "clock_offset_ns": "Int64",
    "clock_offset_uncertainty_ns": "Int64",
    "file": "string",
    "format": "string",         # ringscope | horovod-legacy | horovod-modern | nsys
    "truncated": "bool",        # not closed cleanly: cut, killed, or ended without its SHUTDOWN record
    "events_dropped": "Int64",  # events the tracer itself dropped (its SHUTDOWN record)
    "closed": "bool",           # the trace was closed cleanly (complete JSON and SHUTDOWN record)
    "last_ts_ns": "Int64",      # end of its last event (common axis): where a killed rank stopped
    "events_skipped": "Int64",  # events lost to damaged lines the loader skipped (meta["skipped"])
    "generation": "Int64",      # elastic runs: the generation (world) this file's rank belonged to; else NA
    "cpu_set": "string",        # the CPUs it could run on, "0,1" (its affinity when traced); ranks bound
                                # to cores have one each
}

TABLES = {
    "events": EVENTS,
    "tensor_ops": TENSOR_OPS,
    "fused_ops": FUSED_OPS,
    "readiness": READINESS,
    "cycles": CYCLES,
    "ranks": RANKS,
}


@dataclass
class RunTables:
    """All tables of one run plus its metadata (origin_epoch_ns, size, fusion_threshold, backend, files...)."""

    events: pd.DataFrame
    tensor_ops: pd.DataFrame
    fused_ops: pd.DataFrame
    readiness: pd.DataFrame
    cycles: pd.DataFrame
    ranks: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def events_without_ops(self) -> pd.DataFrame:
        """``events``, where a format rebuilt each tensor op's rows on the "tensor" thread from ``tensor_ops``
        without those rows (or with: it may keep them). What the analyses that read neither those rows nor
        every row read: a store hit then reads a quarter of its events."""
        return self.events

    @property
    def events_extent(self) -> tuple[int, int, int]:
        """``(rows, first start, last end)`` of ``events`` (ns; 0, 0, 0 when none)."""
        return extent(self.events)


def extent(events: pd.DataFrame) -> tuple[int, int, int]:
    """``(rows, first start, last end)`` of ``events`` (ns; 0, 0, 0 when none)."""
    if not len(events):
        return 0, 0, 0
    return len(events), int(events["t_ns"].min()), int((events["t_ns"] + events["dur_ns"]).max())


class StoredTables(RunTables):
    """A run's tables from its store: ``events`` read whole on first use only; until then the analyses that
    need neither each op's rows nor every row read ``events_without_ops``, and the run's facts its extent."""

    _events: pd.DataFrame | None
    _read: Callable[[], pd.DataFrame] | None = None
    _read_without_ops: Callable[[], pd.DataFrame] | None = None
    _without_ops: pd.DataFrame | None = None
    _extent: tuple[int, int, int] | None = None

    @classmethod
    def unread(cls, read_events: Callable[[], pd.DataFrame], without_ops: Callable[[], pd.DataFrame] | None,
               events_extent: tuple[int, int, int], **tables: Any) -> StoredTables:
        """The tables, ``events`` not read yet: ``read_events()`` reads it, ``without_ops()`` its part (None:
        the part is the whole)."""
        out = cls(events=None, **tables)  # type: ignore[arg-type]   # the setter below: not read yet
        out._read, out._read_without_ops, out._extent = read_events, without_ops, events_extent
        return out

    @property  # type: ignore[override]
    def events(self) -> pd.DataFrame:
        if self._events is None and self._read is not None:
            self._events, self._without_ops = self._read(), None
        return self._events

    @events.setter
    def events(self, value: pd.DataFrame | None) -> None:
        self._events = value

    @property
    def events_without_ops(self) -> pd.DataFrame:
        if self._events is not None or self._read_without_ops is None:
            return self.events
        if self._without_ops is None:
            self._without_ops = self._read_without_ops()
        return self._without_ops

    @property
    def events_extent(self) -> tuple[int, int, int]:
        return self._extent if self._extent is not None else extent(self.events)
