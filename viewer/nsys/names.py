"""Recognising NCCL kernels by name, in both of NCCL's naming generations.

Current NCCL: ``ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)``, ``ncclDevKernel_SendRecv``,
``ncclDevKernel_Generic``. Older NCCL: ``ncclKernel_AllReduce_RING_LL_Sum_float(...)``.
"""
from __future__ import annotations

import re

from tracer import vocab

_NCCL = re.compile(r"(?:^|[\s:*&])(nccl(?:Dev)?Kernel)_(\w+)")


def is_nccl_kernel(name) -> bool:
    """True for ``ncclKernel_*`` and ``ncclDevKernel_*`` (also inside a demangled signature)."""
    return isinstance(name, str) and _NCCL.search(name) is not None


def ringscope_nvtx_message(name: str, thread: str | None = None, tensor: str | None = None,
                           step: int | None = None) -> str | None:
    """The NVTX range message ringscope's tracer emits for one trace event (None: it emits none).

    Mirrors ``tracer.timeline.NvtxRecorder``: spans (``span``/``begin``/``end``) use their name and
    steps ``"STEP <n>"``; a tensor's lifecycle slice and spans recorded after the fact (``complete``:
    CYCLE, the memcpy phases) have no range.
    """
    if name in (vocab.CYCLE, vocab.MEMCPY_IN_FUSION_BUFFER, vocab.MEMCPY_OUT_FUSION_BUFFER):
        return None
    if name == vocab.STEP:
        return None if step is None or step < 0 else f"{vocab.STEP} {step}"
    if thread == "tensor":
        return None
    return name
