"""The viewer's vocabularies, one table each (the step's phases, the dtypes' sizes): everything reads them here."""
from __future__ import annotations

from dataclasses import dataclass

from tracer import vocab as V


@dataclass(frozen=True)
class Phase:
    span: str | None    # the span marking it (None: the time no span covers)
    bucket: str         # its column in the step breakdown
    label: str
    colour: str
    precedence: int     # an instant inside several spans goes to the lowest
    advice: str = ""    # what to look at when rank {r} spends longer in it than the others


_CONTENTION = ("compute contention: check rank {r}'s CPU counters, other processes on its host or cores, its GPU "
               "clocks, or uneven batches")
# in the order a step runs them (tables, stacked bars)
PHASES = (
    Phase(V.DATA_WAIT, "data_wait_ns", "data wait", "#9467bd", 1,
          "more loader workers (num_workers, prefetch), or check rank {r}'s storage and input pipeline"),
    Phase(V.FORWARD, "forward_ns", "forward", "#17becf", 5, _CONTENTION),
    Phase(V.BACKWARD, "backward_ns", "backward", "#1f77b4", 4, _CONTENTION),
    Phase(V.OPTIMIZER_STEP, "optimizer_ns", "optimizer step", "#bcbd22", 3,
          "the update itself is slower: look for rank-specific work in step() (logging, clipping on the CPU), or "
          "the same contention as compute"),
    Phase(V.CHECKPOINT, "checkpoint_ns", "checkpoint", "#8c6d31", 2,
          "rank {r}'s checkpoints: save less often, asynchronously (torch.distributed.checkpoint.async_save), or "
          "from one rank, to storage that is not shared with the input pipeline"),
    Phase(V.SYNCHRONIZE, "exposed_comm_ns", "exposed comm", "#e45756", 0),
    Phase(None, "other_ns", "untraced time", "#7f7f7f", 99,
          "time no phase covers: wrap rank {r}'s code between steps in hvd.timeline.region(...) (logging, "
          "checkpoints, evaluation)"),
)
BY_BUCKET = {p.bucket: p for p in PHASES}
BUCKETS = [p.bucket for p in PHASES]
# the framework's own phases: unknown (never guessed) on a rank that recorded none of their spans
FRAMEWORK = [p for p in PHASES if p.span not in (None, V.SYNCHRONIZE)]
# the buckets a rank's lateness is explained by
CAUSES = [p.bucket for p in PHASES if p.span != V.SYNCHRONIZE]

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
               "int32": 4, "int64": 8, "bool": 1}
