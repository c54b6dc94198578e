"""Torch tensors in and out of the numpy engine, sharing memory wherever torch allows it.

A contiguous CPU tensor becomes a numpy *view* (``t.numpy()``): the engine reads it, and in-place ops
land straight in the tensor's storage. Only what numpy cannot hold (bfloat16) or what is not laid out
contiguously is copied, and copied back for in-place ops.
"""
from __future__ import annotations

import numpy as np
import torch

# dtypes numpy has no counterpart for: carried as a wider dtype on the wire, cast back afterwards
_WIRE_DTYPE = {torch.bfloat16: torch.float32, torch.complex32: torch.complex64}


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A numpy array with the tensor's values; a view of the same memory when possible."""
    return numpy_of(tensor)[0]


def numpy_of(tensor: torch.Tensor) -> tuple[np.ndarray, bool]:
    """The tensor's values as a numpy array, and whether that array is a view of its memory."""
    # (every tensor method or property costs ~0.5k instructions: the common case asks one, and
    # lets numpy() refuse what it cannot view)
    if tensor.is_contiguous():
        try:
            return tensor.numpy(), True
        except (TypeError, RuntimeError):
            pass   # not on the CPU, requires grad, bfloat16, or a conjugate or negative bit
    if not tensor.is_cpu:
        raise TypeError(f"to_numpy() wants a CPU tensor, got one on {tensor.device}")
    t = tensor.detach() if tensor.requires_grad else tensor
    wire = _WIRE_DTYPE.get(t.dtype)
    view = wire is None
    if not view:
        t = t.to(wire)
    if not t.is_contiguous():
        t, view = t.contiguous(), False
    if t.dtype.is_complex and t.is_conj():
        t, view = t.resolve_conj(), False
    return t.numpy(), view


def shares_memory(tensor: torch.Tensor, array: np.ndarray) -> bool:
    """True when ``array`` is a view of ``tensor``'s storage (no copy-back needed)."""
    if tensor.device.type != "cpu" or tensor.numel() == 0:
        return False
    return array.__array_interface__["data"][0] == tensor.data_ptr() and array.nbytes == \
        tensor.numel() * tensor.element_size()


def from_numpy(array: np.ndarray, like: torch.Tensor, shape=None) -> torch.Tensor:
    """A tensor over ``array``'s memory, cast back to ``like``'s dtype and moved to its device."""
    out = torch.from_numpy(np.ascontiguousarray(array))
    if shape is not None:
        out = out.reshape(shape)
    if out.dtype != like.dtype:
        out = out.to(like.dtype)
    if out.device != like.device:
        out = out.to(like.device)
    return out


def copy_into(tensor: torch.Tensor, array) -> torch.Tensor:
    """Write ``array`` into ``tensor`` unless it already is ``tensor``'s memory; return ``tensor``."""
    if isinstance(array, torch.Tensor):
        if array.data_ptr() != tensor.data_ptr():
            with torch.no_grad():
                tensor.copy_(array.reshape(tensor.shape))
    elif not shares_memory(tensor, array):
        with torch.no_grad():
            tensor.copy_(torch.from_numpy(np.ascontiguousarray(array)).reshape(tensor.shape))
    return tensor


def from_engine(result, like: torch.Tensor, shape=None) -> torch.Tensor:
    """The engine's result as a tensor with ``like``'s dtype and device."""
    if isinstance(result, torch.Tensor):
        out = result if shape is None else result.reshape(shape)
        return out.to(dtype=like.dtype, device=like.device)
    return from_numpy(result, like=like, shape=shape)
