"""The engine's tensor adapter for torch tensors used as buffers (CUDA tensors, and CPU tensors on
the gloo backend). Fusion buffers and outputs are allocated on the tensor's own device, so CUDA data
stays on the GPU. CPU tensors on the ring/mpi backends go through numpy views instead
(:mod:`collectives.torch.tensors`)."""
from __future__ import annotations

import torch

from collectives.adapters import TensorAdapter, register_adapter

# torch dtypes the engine accepts through this adapter (numpy spelling, plus bfloat16)
SUPPORTED = {"float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64"}


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"`` (the engine's numpy-style spelling)."""
    return str(dtype).replace("torch.", "")


class TorchAdapter(TensorAdapter):
    name = "torch"

    def check(self, t):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"expected a torch.Tensor, got {type(t).__name__}")
        if dtype_name(t.dtype) not in SUPPORTED:
            raise TypeError(f"dtype {dtype_name(t.dtype)} is not supported; use one of "
                            f"{', '.join(sorted(SUPPORTED))}")
        return t

    def device(self, t) -> str:
        return str(t.device)

    def dtype_name(self, t) -> str:
        return dtype_name(t.dtype)

    def shape(self, t) -> tuple:
        return tuple(int(d) for d in t.shape)

    def nbytes(self, t) -> int:
        return int(t.numel() * t.element_size())

    def flat(self, t):
        return t.detach().reshape(-1)     # a view when contiguous

    def inplace_flat(self, t):
        """A flat view of ``t``'s own memory (in-place ops run there), or None if not contiguous."""
        return t.detach().view(-1) if t.is_contiguous() else None

    def same_memory(self, a, b) -> bool:
        return a.device == b.device and a.data_ptr() == b.data_ptr()

    def empty(self, numel, dtype_name, device="cpu"):
        return torch.empty(int(numel), dtype=getattr(torch, dtype_name), device=device)

    def zeros(self, numel, dtype_name, device="cpu"):
        """Zeros for a rank that joined; ``device`` may be a bare kind ("cuda": the current GPU)."""
        if device == "cuda":
            device = torch.device("cuda", torch.cuda.current_device())
        return torch.zeros(int(numel), dtype=getattr(torch, dtype_name), device=device)

    def copy_(self, dst, dst_offset, src) -> None:
        dst[dst_offset:dst_offset + src.numel()].copy_(src.reshape(-1))

    def pack(self, buf, tensors) -> None:
        """Copy ``tensors`` one after another into the flat ``buf`` in two torch calls whatever
        their number: every call releases and retakes the GIL, which the user's thread holds while
        it submits, and on a GPU each call launches a kernel."""
        with torch.no_grad():
            buf.copy_(torch._utils._flatten_dense_tensors(tensors))

    def unpack(self, buf, sizes, outputs) -> list:
        """Results for consecutive pieces of ``buf``: written into ``outputs[i]`` where one is
        given (in-place ops; the output itself is the result), else pieces of one new buffer."""
        given = [o for o in outputs if o is not None]
        if len(given) == len(outputs):
            with torch.no_grad():
                torch._foreach_copy_(given, torch._utils._unflatten_dense_tensors(buf, given))
            return given
        fresh = buf.clone().split(list(sizes))
        with torch.no_grad():
            for o, piece in zip(outputs, fresh):
                if o is not None:
                    o.copy_(piece.view(o.shape))
        return [o if o is not None else piece for o, piece in zip(outputs, fresh)]

    def slice(self, buf, offset, numel):
        return buf[offset:offset + numel]

    def scale_(self, buf, factor) -> None:
        if factor == 1.0:
            return
        if buf.dtype.is_floating_point:
            buf.mul_(factor)
        else:  # integers: multiply in float64, truncate toward zero
            buf.copy_(torch.trunc(buf.to(torch.float64) * factor).to(buf.dtype))

    def average_(self, buf, n) -> None:
        if n == 1:
            return
        if buf.dtype.is_floating_point:
            buf.div_(n)
        else:
            buf.copy_(torch.div(buf, n, rounding_mode="trunc"))

    def result(self, entry, flat):
        shape = entry.meta.get("out_shape", entry.shape)
        out = entry.output
        if out is None:
            return flat.reshape(shape)
        if out.data_ptr() != flat.data_ptr() or out.numel() != flat.numel():
            with torch.no_grad():
                out.copy_(flat.reshape(out.shape))
        return out

    def default_backend(self, t, cfg) -> str:
        if t.device.type == "cuda":
            return "nccl"
        return "gloo"


TORCH = TorchAdapter()
register_adapter(TORCH)   # joined ranks rebuild zero tensors through the adapter registry
