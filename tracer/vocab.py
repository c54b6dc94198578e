"""The event vocabulary: every name, thread, category and argument key that the runtime emits.

The runtime (``collectives``) writes these names through :mod:`tracer.recorder`; the viewer reads
them back through this same module. Nothing here imports anything heavy.

File layout (one file per rank, Chrome-trace *object* form, ``ts``/``dur`` in microseconds relative
to the rank's base; see ``docs/TRACE_FORMAT.md``)::

    {"otherData": {"ringscope": {...RunMeta...}},
     "traceEvents": [
       {...},            one event per line
       ...
     ]}

Threads (``tid``) inside each rank's process (``pid`` = rank):
    FRAMEWORK   the user's thread: SYNCHRONIZE waits, STEP spans
    NEGOTIATION coordinator-side READY ticks (rank 0 / a process set's coordinator only)
    FUSION      FUSED_RESPONSE spans with nested MEMCPY_IN/OUT_FUSION_BUFFER
    BACKEND     the collective itself (RING_ALLREDUCE with nested RING_REDUCE_SCATTER/RING_ALLGATHER,
                MPI_ALLREDUCE, NCCL_ALLREDUCE, GLOO_ALLREDUCE, MPI_ALLGATHER, ...)
    CYCLES      CYCLE spans (only with mark-cycles on)
    TENSOR_BASE + k   the k-th tensor name's lifecycles (k in order of first use; named by
                metadata lines): they never overlap there, a name is in flight at most once

Per-tensor lifecycles overlap each other, so each tensor's are on a thread of its own (``cat``
"tensor"), as in Horovod's timeline: one slice named after the tensor, from its submission to its
completion, with the tensor's args. A finished op is one ``X``; an op whose begin had to be written
before it finished (in flight at a flush, or with NVTX) is a ``B`` and later an ``E``, so a hung or
killed job leaves it open. The phases between are the same for every tensor of a response, so
they are written once per response, on its FUSED_RESPONSE span: the span starts when the response
starts executing and its ``queue_ns`` arg is how long the response waited before that since it
arrived. A tensor's negotiation is therefore [its submission, FUSED_RESPONSE start - queue_ns] and
its QUEUE phase [FUSED_RESPONSE start - queue_ns, FUSED_RESPONSE start] (the viewer rebuilds both
per tensor). Format 2 wrote each lifecycle as an async ``b``/``e`` pair on the framework thread,
with ``"id2": {"local": <tensor>}``; format 1 also nested NEGOTIATE_<OP> and QUEUE async slices
in it. The viewer reads format 3 only.
"""

VERSION_KEY = "ringscope"  # key of the run metadata inside "otherData"
FORMAT_VERSION = 3   # 3: a thread per tensor (see above); 2: async b/e; 1: nested phases too

# ---- threads -------------------------------------------------------------------------------
TID_FRAMEWORK = 1
TID_NEGOTIATION = 2
TID_FUSION = 3
TID_BACKEND = 4
TID_CYCLES = 5
TID_TENSOR_BASE = 1000   # + k: the k-th tensor's lifecycles (numbered by the writer)
THREAD_NAMES = {
    TID_FRAMEWORK: "framework",
    TID_NEGOTIATION: "negotiation",
    TID_FUSION: "fusion",
    TID_BACKEND: "backend",
    TID_CYCLES: "cycles",
}

# ---- categories (``cat``) ------------------------------------------------------------------
CAT_TENSOR = "tensor"        # per-tensor lifecycle (X, or B/E, on the tensor's thread)
CAT_FRAMEWORK = "framework"
CAT_NEGOTIATION = "negotiation"
CAT_FUSION = "fusion"
CAT_MEMCPY = "memcpy"
CAT_COMM = "comm"            # the collective itself, on the backend thread
CAT_CYCLE = "cycle"
CAT_COUNTER = "counter"
CAT_META = "meta"

# ---- collective op types (Horovod's names) -------------------------------------------------
ALLREDUCE = "ALLREDUCE"
ALLGATHER = "ALLGATHER"
BROADCAST = "BROADCAST"
ALLTOALL = "ALLTOALL"
REDUCESCATTER = "REDUCESCATTER"
BARRIER = "BARRIER"
JOIN = "JOIN"
ERROR = "ERROR"


def negotiate_name(op_type: str) -> str:
    """Name of the negotiation phase of one op type, e.g. ``NEGOTIATE_ALLREDUCE``."""
    return "NEGOTIATE_" + op_type


NEGOTIATE_PREFIX = "NEGOTIATE_"

# ---- phases --------------------------------------------------------------------------------
# framework thread
SUBMIT = "SUBMIT"                  # instant (not emitted by the runtime: the outer async begin marks a
                                   # submission; kept for readers of older traces)
SYNCHRONIZE = "SYNCHRONIZE"        # X: time the framework blocked in synchronize()/wait
STEP = "STEP"                      # X: one training step, from mark_step() to the next
# per tensor: response received -> its fused response starts executing (format 1: a nested async
# slice per tensor; format 2: FUSED_RESPONSE's queue_ns, rebuilt per tensor by the viewer)
QUEUE = "QUEUE"
# negotiation thread (coordinator only)
READY = "READY"                    # instant: coordinator learned that args.rank is ready with args.tensors
                                   # (format 2: one line per message of a rank, listing its tensors;
                                   # format 1: one line per tensor, args.tensor)
STALL = "STALL"                    # instant: stall inspector report (args.missing: {rank: [tensors]})
# fusion thread
FUSED_RESPONSE = "FUSED_RESPONSE"  # X: one executed response (one or many fused tensors)
MEMCPY_IN_FUSION_BUFFER = "MEMCPY_IN_FUSION_BUFFER"
MEMCPY_OUT_FUSION_BUFFER = "MEMCPY_OUT_FUSION_BUFFER"
# backend thread: "<BACKEND>_<OP>" activity spans
RING_ALLREDUCE = "RING_ALLREDUCE"
RING_REDUCE_SCATTER = "RING_REDUCE_SCATTER"   # nested in RING_ALLREDUCE
RING_ALLGATHER = "RING_ALLGATHER"             # nested in RING_ALLREDUCE
MPI_ALLREDUCE = "MPI_ALLREDUCE"
MPI_ALLGATHER = "MPI_ALLGATHER"
MPI_BCAST = "MPI_BCAST"
MPI_ALLTOALL = "MPI_ALLTOALL"
MPI_REDUCESCATTER = "MPI_REDUCESCATTER"
MPI_BARRIER = "MPI_BARRIER"
NCCL_ALLREDUCE = "NCCL_ALLREDUCE"
NCCL_ALLGATHER = "NCCL_ALLGATHER"
NCCL_BCAST = "NCCL_BCAST"
NCCL_ALLTOALL = "NCCL_ALLTOALL"
NCCL_REDUCESCATTER = "NCCL_REDUCESCATTER"
GLOO_ALLREDUCE = "GLOO_ALLREDUCE"
GLOO_ALLGATHER = "GLOO_ALLGATHER"
GLOO_BCAST = "GLOO_BCAST"
GLOO_ALLTOALL = "GLOO_ALLTOALL"
GLOO_REDUCESCATTER = "GLOO_REDUCESCATTER"
GLOO_BARRIER = "GLOO_BARRIER"
NCCL_BARRIER = "NCCL_BARRIER"
COMM_ACTIVITIES = frozenset({
    RING_ALLREDUCE, MPI_ALLREDUCE, MPI_ALLGATHER, MPI_BCAST, MPI_ALLTOALL, MPI_REDUCESCATTER,
    MPI_BARRIER, NCCL_ALLREDUCE, NCCL_ALLGATHER, NCCL_BCAST, NCCL_ALLTOALL, NCCL_REDUCESCATTER,
    GLOO_ALLREDUCE, GLOO_ALLGATHER, GLOO_BCAST, GLOO_ALLTOALL, GLOO_REDUCESCATTER, GLOO_BARRIER,
    NCCL_BARRIER,
})
RING_SUBPHASES = frozenset({RING_REDUCE_SCATTER, RING_ALLGATHER})
# cycles thread
CYCLE = "CYCLE"                    # X: one background-engine cycle (mark-cycles on)
# metadata-ish instants (framework thread)
SHUTDOWN = "ringscope.shutdown"    # instant at close: args {clock_offset_ns, clock_offset_uncertainty_ns,
                                   #  events_dropped, events_written}
CAP_REACHED = "ringscope.cap_reached"  # instant: size cap hit, later events not recorded (args.bytes)

# ---- counters (ph C, cat counter) ----------------------------------------------------------
COUNTER_QUEUE_DEPTH = "queue_depth"            # ops submitted but not yet completed on this rank
COUNTER_BYTES_IN_FLIGHT = "bytes_in_flight"    # bytes of those ops
COUNTER_FUSION_FILL = "fusion_buffer_fill"     # bytes packed into the fusion buffer per response
COUNTER_EVENTS_DROPPED = "events_dropped"      # written by the tracer: events lost to a full buffer

# ---- framework phases (issue 28): X spans, cat CAT_PHASE, on the thread that ran them ----------
CAT_PHASE = "phase"            # DATA_WAIT, FORWARD, BACKWARD, OPTIMIZER_STEP, CHECKPOINT
CAT_REGION = "region"          # a user's hvd.timeline.region(name): name = the user's name
DATA_WAIT = "DATA_WAIT"        # the training loop waited for its next batch (wrap_loader)
FORWARD = "FORWARD"            # one call of the watched root module (watch)
BACKWARD = "BACKWARD"          # first gradient hook -> last gradient submitted (DistributedOptimizer)
OPTIMIZER_STEP = "OPTIMIZER_STEP"  # DistributedOptimizer.step(), including its synchronize
CHECKPOINT = "CHECKPOINT"      # saving or loading a checkpoint (hvd.timeline.checkpoint)
TID_USER_BASE = 500            # + k: the k-th other OS thread that recorded a phase or region
# ---- system counters (issue 28): "C" events, one track each, sampled by the tracer's thread -------
COUNTER_CPU_PCT = "cpu_pct"            # this process's CPU use since the last sample, % of one core
COUNTER_RSS_MB = "rss_mb"              # resident set size, MiB
COUNTER_LOAD1 = "load1"                # host's 1-minute load average
COUNTER_GPU_UTIL_PCT = "gpu_util_pct"  # NVML utilization.gpu of the rank's device
COUNTER_GPU_MEM_MB = "gpu_mem_mb"      # NVML memory used on the rank's device, MiB
SYSTEM_COUNTERS = (COUNTER_CPU_PCT, COUNTER_RSS_MB, COUNTER_LOAD1, COUNTER_GPU_UTIL_PCT, COUNTER_GPU_MEM_MB)

# ---- argument keys (``args``) -------------------------------------------------------------
ARG_TENSOR = "tensor"          # tensor name (str)
ARG_TENSORS = "tensors"        # list of tensor names in a fused response (and in a READY, format 2)
ARG_COUNT = "count"            # number of tensors fused
ARG_BYTES = "bytes"            # payload bytes (int)
ARG_DTYPE = "dtype"            # numpy-style dtype name, e.g. "float32"
ARG_SHAPE = "shape"            # list of ints
ARG_OP = "op"                  # collective op type (ALLREDUCE, ...)
ARG_REDUCE_OP = "reduce_op"    # Sum, Average, Min, Max, Product
ARG_PROCESS_SET = "process_set"  # int id, 0 = global
ARG_STEP = "step"              # training step (int, -1 when unknown)
ARG_RESPONSE = "response"      # response id, assigned by the coordinator: the same collective has the
                               # same id on every rank of its process set
ARG_CYCLE = "cycle"
ARG_RANK = "rank"
ARG_BACKEND = "backend"        # ring, mpi, nccl, gloo
ARG_THRESHOLD = "threshold"    # fusion threshold in bytes
ARG_ERROR = "error"
ARG_PRIORITY = "priority"      # an op's priority (int, higher runs first); a response's highest
ARG_QUEUE_NS = "queue_ns"      # FUSED_RESPONSE: ns from the response's arrival to its start (format 2)

# ---- run metadata keys (otherData.ringscope) ----------------------------------------------
META_KEYS = (
    "format_version", "version", "rank", "size", "local_rank", "local_size", "cross_rank",
    "cross_size", "host", "pid", "backend", "fusion_threshold", "cycle_time_ms",
    "base_epoch_ns",              # wall clock (time.time_ns) at ts == 0 on this rank
    "clock_offset_ns",            # this rank's wall clock minus rank 0's, measured at init
    "clock_offset_uncertainty_ns",  # half the minimum round trip of the ping-pong
    "process_sets",               # {id: [ranks]}
    "mark_cycles", "steps_window",  # e.g. [100, 200] or null
    "cpus",                       # CPUs this rank's process may run on (the what-if's core count)
    "cpu_set",                    # their ids (which ranks share which cores, when ranks are bound)
)


# ---- hierarchical allreduce (issue 31): nested in RING_ALLREDUCE / MPI_ALLREDUCE on the backend thread,
# whose args gain ARG_HIERARCHICAL: true; each carries ARG_BYTES and ARG_LINK ("intra" or "cross").
# The buffer (S bytes) is cut into one shard per local rank (docs/MULTIHOST.md), on every rank:
INTRA_HOST_REDUCE = "INTRA_HOST_REDUCE"        # reduce-scatter within the host: bytes S
CROSS_HOST_ALLREDUCE = "CROSS_HOST_ALLREDUCE"  # this rank's shard with the same local rank of every
                                               # host: bytes = the shard, "size" = the hosts
INTRA_HOST_BROADCAST = "INTRA_HOST_BROADCAST"  # allgather of the shards within the host: bytes S
HIERARCHICAL_SUBPHASES = frozenset({INTRA_HOST_REDUCE, CROSS_HOST_ALLREDUCE, INTRA_HOST_BROADCAST})
ARG_HIERARCHICAL = "hierarchical"
ARG_LINK = "link"
LINK_INTRA = "intra"
LINK_CROSS = "cross"
# run meta: "hierarchical_allreduce" (bool: the global set's allreduces run host by host), and where
# the setting asked for it but they run flat, "hierarchical_fallback" (why, e.g. "one host")
META_KEYS = META_KEYS + ("hierarchical_allreduce", "hierarchical_fallback")

# ---- elastic jobs (issue 32): X spans on the framework thread, see docs/ELASTIC.md -------------
CAT_ELASTIC = "elastic"
ELASTIC_RESET = "ELASTIC_RESET"      # a new world's rank: from its init to the end of its first step
ELASTIC_COMMIT = "ELASTIC_COMMIT"    # around State.commit() (args bytes, step)
ELASTIC_RESTORE = "ELASTIC_RESTORE"  # fetching + restoring + syncing the committed state (args bytes)

# ---- torch DDP jobs traced without the runtime (issue 44): see docs/DDP.md ----------------------
# run meta "source": where the trace came from, "ddp" (absent: ringscope's runtime); "ddp": DDP's
# settings ({bucket_cap_bytes, first_bucket_cap_bytes, gradient_as_bucket_view, static_graph,
# find_unused_parameters, comm_hook, params: [[name, bytes], ...] in registration order}). Each bucket
# is a tensor op named bucket.<index>, a FUSED_RESPONSE listing it (args ARG_BUCKET, ARG_PARAMS) and a
# <BACKEND>_ALLREDUCE activity.
SOURCE_DDP = "ddp"
ARG_BUCKET = "bucket"          # FUSED_RESPONSE of a DDP bucket: its index
ARG_PARAMS = "params"          # FUSED_RESPONSE of a DDP bucket: the names of the parameters it holds
# a torch.distributed collective called while watched (collectives/torch/ddp_collectives.py): a tensor op
# named <op>.<group>, a FUSED_RESPONSE (ARG_PROCESS_SET: the group's name in c10d; ARG_PHASE) and its activity
SOURCE_FSDP = "fsdp"           # run meta "source" of an FSDP2 job's trace
ARG_PHASE = "phase"            # FUSED_RESPONSE of a watched collective: "forward" or "backward" (else absent)
META_KEYS = META_KEYS + ("source", "ddp")
