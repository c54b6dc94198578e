"""Control messages between ranks and the coordinator (pickled over the control communicator)."""
from __future__ import annotations

from dataclasses import dataclass, field

TAG_REQUEST = 1     # worker -> coordinator: (rank, [Request, ...])
TAG_RESPONSE = 2    # coordinator -> member: (next id, [Response, ...]), executed in order; with the
                    # response cache on, every rank gets the next id (it orders them, bit_rounds.py)

# internal op types besides tracer.vocab's
SHUTDOWN = "SHUTDOWN"
JOIN_NAME = "__join__"
SHUTDOWN_NAME = "__shutdown__"
ERROR = "ERROR"
ADD_PROCESS_SET = "ADD_PROCESS_SET"        # shape = the new set's ranks; every rank creates its comm
REMOVE_PROCESS_SET = "REMOVE_PROCESS_SET"  # shape = (set id,)
CONTROL_OPS = (SHUTDOWN, ADD_PROCESS_SET, REMOVE_PROCESS_SET)


@dataclass
class Request:
    """What one rank asks for one tensor."""
    rank: int
    name: str
    op_type: str
    dtype: str
    shape: tuple
    reduce_op: str = "Sum"
    prescale: float = 1.0
    postscale: float = 1.0
    root: int = -1
    splits: tuple | None = None
    process_set: int = 0
    device: str = "cpu"
    backend: str = "ring"
    group: str | None = None
    group_size: int = 0
    nbytes: int = 0
    adapter: str = "numpy"     # adapters.get_adapter(name) rebuilds zeros on ranks that joined
    priority: int = 0
    report: int = 0            # STALL_REPORT / STALL_WITHDRAW: a cached tensor, for the stall
                               # inspector only (it is negotiated by bit vectors)
    waited_s: float = 0.0      # a report: how long the reporting rank has waited for it


STALL_REPORT = 1     # this rank has had the cached tensor pending for long
STALL_WITHDRAW = 2   # ... and it has run since


@dataclass
class Response:
    """One collective every member of ``process_set`` executes, in the coordinator's order.

    ``names`` holds more than one tensor when fused. ``first_dims`` (allgather) and ``splits``
    (alltoall) give every member's value, indexed by rank within the set.
    """
    id: int
    op_type: str
    names: list
    process_set: int = 0
    dtype: str = ""
    reduce_op: str = "Sum"
    prescale: float = 1.0
    postscale: float = 1.0
    root: int = -1
    backend: str = "ring"
    device: str = "cpu"
    nbytes: int = 0
    first_dims: dict = field(default_factory=dict)   # name -> [dim0 per set rank]
    splits: dict = field(default_factory=dict)       # name -> [[splits] per set rank]
    error: str | None = None
    targets: list | None = None    # ranks that get it, when not every member (errors for askers)
    joined: list = field(default_factory=list)   # members that joined: they reduce zeros
    shapes: dict = field(default_factory=dict)   # name -> shape, for the ranks that joined
    adapter: str = "numpy"
    priority: int = 0          # the highest of its tensors'
    cacheable: bool = False    # members keep it in their response cache (a plain allreduce)
