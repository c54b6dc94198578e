"""Tensor adapters: how the engine sizes, packs, scales and returns a framework's tensors.

The engine only talks to tensors through an adapter, so it never imports torch. ``NumpyAdapter`` is
the reference implementation; the torch frontend supplies its own (see docs/ARCHITECTURE.md,
"Engine extension points").
"""
from __future__ import annotations

import numpy as np

from collectives import config as _config
from collectives._core import pack as _pack
from collectives._core import unpack as _unpack

SUPPORTED_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")
# bytes per element of every dtype an adapter carries (the torch adapter's bfloat16 too)
ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1,
            "int16": 2, "int32": 4, "int64": 8}


class TensorAdapter:
    """Interface; every buffer argument is a flat 1-D buffer of the adapter's framework."""

    name = "abstract"

    def device(self, t) -> str: raise NotImplementedError
    def dtype_name(self, t) -> str: raise NotImplementedError
    def shape(self, t) -> tuple: raise NotImplementedError
    def nbytes(self, t) -> int: raise NotImplementedError
    def flat(self, t): raise NotImplementedError
    def empty(self, numel: int, dtype_name: str, device: str): raise NotImplementedError
    def copy_(self, dst, dst_offset: int, src) -> None: raise NotImplementedError
    def pack(self, buf, tensors) -> None: raise NotImplementedError
    def unpack(self, buf, sizes, outputs) -> list: raise NotImplementedError
    def slice(self, buf, offset: int, numel: int): raise NotImplementedError
    def scale_(self, buf, factor: float) -> None: raise NotImplementedError
    def average_(self, buf, n: int) -> None: raise NotImplementedError
    def result(self, entry, flat): raise NotImplementedError
    def default_backend(self, t, cfg) -> str: raise NotImplementedError


def _is_int(dtype) -> bool:
    return dtype.kind in "iub"


_NAMES: dict = {}   # numpy dtype -> its name (dtype.name costs microseconds per call)


def _name(dtype) -> str:
    name = _NAMES.get(dtype)
    if name is None:
        name = _NAMES[dtype] = dtype.name
    return name


class NumpyAdapter(TensorAdapter):
    """numpy arrays on the host; the results are new arrays (or ``entry.output`` when given)."""

    name = "numpy"

    def coerce(self, t):
        """numpy scalars become 0-d arrays; anything else is returned as is (and checked later)."""
        return np.asarray(t) if isinstance(t, np.generic) else t

    def check(self, t):
        if not isinstance(t, np.ndarray):
            raise TypeError(f"expected a numpy array, got {type(t).__name__}")
        if _name(t.dtype) not in SUPPORTED_DTYPES:
            raise TypeError(f"dtype {t.dtype.name} is not supported; use one of "
                            f"{', '.join(SUPPORTED_DTYPES)}")
        if not t.dtype.isnative:   # bytes go over the wire as-is: use this machine's byte order
            t = t.astype(t.dtype.newbyteorder("="))
        return t

    def device(self, t) -> str:
        return "cpu"

    def dtype_name(self, t) -> str:
        return _name(t.dtype)

    def shape(self, t) -> tuple:
        return t.shape   # a tuple of ints already

    def nbytes(self, t) -> int:
        return int(t.nbytes)

    def flat(self, t):
        return np.ravel(t, order="C")  # a view when C-contiguous, else a contiguous copy

    def inplace_flat(self, t):
        """A flat view sharing t's memory, or None when t is not contiguous."""
        return t.reshape(-1) if t.flags.c_contiguous and t.flags.writeable else None

    def same_memory(self, a, b) -> bool:
        return bool(np.shares_memory(a, b))

    def empty(self, numel, dtype_name, device="cpu"):
        return np.empty(int(numel), dtype=dtype_name)

    def copy_(self, dst, dst_offset, src) -> None:
        dst[dst_offset:dst_offset + src.size] = src

    def pack(self, buf, tensors) -> None:
        """Copy ``tensors`` one after another into the flat ``buf``: a memcpy each in the native
        core, or one numpy call when some tensor is not contiguous."""
        if not _pack(buf, tensors):
            np.concatenate([t.reshape(-1) for t in tensors], out=buf)

    def unpack(self, buf, sizes, outputs) -> list:
        """Results for consecutive pieces of ``buf``: written into ``outputs[i]`` where one is
        given (in-place ops; the output itself is the result), else flat in new memory."""
        if _unpack(buf, outputs):   # every output given and contiguous: a memcpy each
            return list(outputs)
        fresh = buf.copy() if any(o is None for o in outputs) else None   # (one copy for those)
        out, off = [], 0
        for n, o in zip(sizes, outputs):
            if o is None:
                out.append(fresh[off:off + n])
            else:
                o[...] = buf[off:off + n].reshape(o.shape)
                out.append(o)
            off += n
        return out

    def slice(self, buf, offset, numel):
        return buf[offset:offset + numel]

    def scale_(self, buf, factor) -> None:
        if factor == 1.0:
            return
        if _is_int(buf.dtype):
            buf[...] = np.trunc(buf * np.float64(factor)).astype(buf.dtype, copy=False)
        elif buf.dtype == np.float16:   # in float32, as Horovod does on the CPU: no fp16 factor
            np.multiply(buf, np.float32(factor), out=buf, casting="unsafe")
        else:
            np.multiply(buf, buf.dtype.type(factor), out=buf)

    def average_(self, buf, n) -> None:
        if n == 1:
            return
        if _is_int(buf.dtype):
            if buf.dtype.kind == "u":
                np.floor_divide(buf, n, out=buf)
            else:  # truncate toward zero
                neg = buf < 0
                np.abs(buf, out=buf)
                np.floor_divide(buf, n, out=buf)
                np.negative(buf, out=buf, where=neg)
        else:
            np.divide(buf, buf.dtype.type(n), out=buf)

    def result(self, entry, flat):
        shape = entry.meta.get("out_shape", entry.shape)
        if entry.output is not None:
            if flat is not entry.output and not np.shares_memory(entry.output, flat):
                entry.output[...] = flat.reshape(entry.output.shape)
            return entry.output
        return flat.reshape(shape)

    def default_backend(self, t, cfg) -> str:
        return _config.cpu_backend(cfg)


NUMPY = NumpyAdapter()
_ADAPTERS = {NUMPY.name: NUMPY}


def register_adapter(adapter) -> None:
    """Make ``adapter`` findable by name (ranks that joined rebuild zero tensors through it)."""
    _ADAPTERS[adapter.name] = adapter


def get_adapter(name: str):
    try:
        return _ADAPTERS[name]
    except KeyError:
        raise ValueError(f"no tensor adapter named {name!r} is registered") from None


def zeros(adapter, numel: int, dtype_name: str, device: str):
    """A zero-filled flat buffer; ``device`` may be a device kind ("cuda") for a joined rank."""
    make = getattr(adapter, "zeros", None)
    if make is not None:
        return make(numel, dtype_name, device)
    buf = adapter.empty(numel, dtype_name, device)
    buf[...] = 0
    return buf
