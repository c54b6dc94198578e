"""The timeline's span classes and their colours: the step's phases from ``viewer/vocab.py`` (a phase
added there shows here too), then the runtime's own stages, GPU kernels and elastic resets."""
from __future__ import annotations

from viewer import vocab

# class -> colour; the order is the legend order
PHASES = {
    "STEP": "#d9d9d9",
    **{p.span: p.colour for p in vocab.PHASES if p.span},
    "tensor": "#bab0ac",
    "NEGOTIATE": "#f58518",
    "QUEUE": "#eeca3b",
    "FUSED_RESPONSE": "#72b7b2",
    "MEMCPY_IN": "#b279a2",
    "MEMCPY_OUT": "#ff9da6",
    "COMM": "#4c78a8",
    "REDUCE_SCATTER": "#54a24b",
    "ALLGATHER": "#88d27a",
    "INTRA_HOST": "#9ecae9",     # hierarchical allreduce: reduce and broadcast within a host
    "CROSS_HOST": "#d62728",     # hierarchical allreduce: the allreduce across hosts
    "CYCLE": "#9d755d",
    "GPU NCCL": "#1f3d7a",
    "GPU kernel": "#2ca02c",
    "ELASTIC": "#8c564b",
    "other": "#7f7f7f",
}
PHASE_NAMES = list(PHASES)

_EXACT = {
    **{n: n for n in ("STEP", *(p.span for p in vocab.PHASES if p.span), "QUEUE", "FUSED_RESPONSE", "CYCLE")},
    "MEMCPY_IN_FUSION_BUFFER": "MEMCPY_IN", "MEMCPY_OUT_FUSION_BUFFER": "MEMCPY_OUT",
    "MEMCPY_IN_HOST_BUFFER": "MEMCPY_IN", "MEMCPY_OUT_HOST_BUFFER": "MEMCPY_OUT",
    "RING_REDUCE_SCATTER": "REDUCE_SCATTER", "RING_ALLGATHER": "ALLGATHER",
    "INTRA_HOST_REDUCE": "INTRA_HOST", "INTRA_HOST_BROADCAST": "INTRA_HOST", "CROSS_HOST_ALLREDUCE": "CROSS_HOST",
    "ELASTIC_RESET": "ELASTIC", "ELASTIC_RESTORE": "ELASTIC", "ELASTIC_COMMIT": "ELASTIC",
}


def phase_of(thread: str, name: str, depth: int) -> str:
    """The class of one span, from its thread, name and nesting depth."""
    thread = thread or ""
    name = name or ""
    if thread.startswith("gpu:"):
        return "GPU NCCL" if "nccl" in name.lower() else "GPU kernel"
    if name in _EXACT:
        return _EXACT[name]
    if name.startswith("NEGOTIATE_"):
        return "NEGOTIATE"
    if name.startswith(("RING_", "MPI_", "NCCL_", "GLOO_")):
        return "COMM"
    return "tensor" if thread == "tensor" and depth == 0 else "other"
