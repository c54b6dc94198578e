"""Gradient compression for allreduce: ``Compression.none`` and ``Compression.fp16`` (Horovod's API)."""
from __future__ import annotations

import torch


class Compressor:
    """Interface: ``compress(tensor) -> (tensor, ctx)`` before the allreduce, ``decompress`` after."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends the tensor as it is."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Casts floating-point tensors to float16 for the wire and back to their dtype afterwards."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)


class Compression:
    """The available compressors, used as ``compression=Compression.fp16``."""

    none = NoneCompressor
    fp16 = FP16Compressor
