"""ringscope's collective runtime: Horovod-style negotiated, fused collectives over MPI.

Framework-neutral (numpy) API; the torch frontend lives in ``collectives.torch``. ``timeline``
(:mod:`collectives.timeline`) marks regions and data-loading waits in the trace. Launch with
``python -m collectives.launcher -np N script.py`` (or plain ``mpiexec -n N python script.py``).
"""
from collectives import elastic, timeline
from collectives.api import (
                             allgather,
                             allgather_async,
                             allreduce,
                             allreduce_,
                             allreduce_async,
                             allreduce_async_,
                             alltoall,
                             alltoall_async,
                             barrier,
                             broadcast,
                             broadcast_,
                             broadcast_async,
                             broadcast_async_,
                             grouped_allreduce,
                             grouped_allreduce_async,
                             join,
                             poll,
                             reducescatter,
                             reducescatter_async,
                             synchronize,
)
from collectives.config import ConfigError
from collectives.handles import CollectiveError, GroupHandle, Handle
from collectives.ops import Average, Max, Min, Product, ReduceOp, Sum
from collectives.process_sets import ProcessSet, global_process_set
from collectives.runtime import (
                             add_process_set,
                             cross_rank,
                             cross_size,
                             init,
                             is_initialized,
                             local_rank,
                             local_size,
                             mark_step,
                             rank,
                             remove_process_set,
                             shutdown,
                             size,
                             start_timeline,
                             stop_timeline,
)

__all__ = [
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size", "cross_rank",
    "cross_size", "mark_step", "start_timeline", "stop_timeline", "allreduce", "allreduce_async",
    "allreduce_", "allreduce_async_", "broadcast_", "broadcast_async_", "grouped_allreduce",
    "grouped_allreduce_async", "allgather", "allgather_async", "broadcast", "broadcast_async",
    "alltoall", "alltoall_async", "reducescatter", "reducescatter_async", "barrier", "join", "poll",
    "synchronize", "Average", "Sum", "Min", "Max", "Product", "ReduceOp", "ProcessSet",
    "global_process_set", "add_process_set", "remove_process_set", "Handle", "GroupHandle",
    "CollectiveError", "ConfigError", "timeline", "elastic",
]
