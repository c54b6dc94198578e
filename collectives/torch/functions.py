"""Broadcasting model and optimizer state, and moving picklable objects between ranks."""
from __future__ import annotations

import io
import pickle
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from collectives.torch import mpi_ops as ops

if TYPE_CHECKING:
    from collectives.process_sets import ProcessSet


def broadcast_parameters(params: dict[str, torch.Tensor | None] | Iterable[tuple[str, torch.Tensor | None]],
                         root_rank: int = 0, process_set: ProcessSet | None = None) -> None:
    """Overwrite every rank's parameters with ``root_rank``'s, in place.

    ``params`` is a ``state_dict()`` (dict) or ``named_parameters()``-style ``(name, tensor)`` pairs.
    """
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, (list, tuple)) or hasattr(params, "__iter__"):
        items = list(params)
        if items and not (isinstance(items[0], (tuple, list)) and len(items[0]) == 2):
            raise ValueError("broadcast_parameters wants a state_dict or (name, tensor) pairs")
    else:
        raise ValueError(f"broadcast_parameters: unsupported params type {type(params).__name__}")
    handles = []
    for name, p in items:
        if p is None:
            continue
        t = p.data if isinstance(p, torch.nn.Parameter) else p
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"broadcast_parameters: {name!r} is a {type(p).__name__}, not a tensor")
        handles.append(ops.broadcast_async_(t, root_rank, name=name, process_set=process_set))
    for h in handles:
        ops.synchronize(h)


# ---- objects -------------------------------------------------------------------------------

def _to_bytes_tensor(obj: object) -> torch.Tensor:
    buf = io.BytesIO()
    pickle.dump(obj, buf, protocol=pickle.HIGHEST_PROTOCOL)
    return torch.from_numpy(np.frombuffer(buf.getbuffer(), dtype=np.uint8).copy())


def _from_bytes_tensor(t: torch.Tensor) -> Any:
    return pickle.loads(t.numpy().tobytes())


def _object_name(kind: str, name: str | None, process_set: ProcessSet | None) -> str:
    # a call counter per process set, not the object's type: non-root ranks usually pass None
    if name is not None:
        return name
    sid = ops._ps.set_id_of(process_set)
    return f"{kind}.{ops._next((kind, sid))}" + (f".set{sid}" if sid else "")


def broadcast_object(obj: object, root_rank: int = 0, name: str | None = None,
                     process_set: ProcessSet | None = None) -> Any:
    """Return ``root_rank``'s ``obj`` (any picklable object) on every rank."""
    name = _object_name("object", name, process_set)
    is_root = ops.is_root(root_rank, process_set)
    payload = _to_bytes_tensor(obj) if is_root else torch.empty(0, dtype=torch.uint8)
    size = torch.tensor([payload.numel()], dtype=torch.int64)
    ops.broadcast_(size, root_rank, name=f"{name}.sz", process_set=process_set)
    if not is_root:
        payload = torch.empty(int(size.item()), dtype=torch.uint8)
    ops.broadcast_(payload, root_rank, name=f"{name}.t", process_set=process_set)
    return obj if is_root else _from_bytes_tensor(payload)


def allgather_object(obj: object, name: str | None = None, process_set: ProcessSet | None = None) -> list[Any]:
    """Return the list of every rank's ``obj`` (any picklable object), in rank order."""
    name = _object_name("object", name, process_set)
    payload = _to_bytes_tensor(obj)
    sizes = ops.synchronize(ops.allgather_async(torch.tensor([payload.numel()], dtype=torch.int64),
                                                name=f"{name}.sz", process_set=process_set))
    gathered = ops.synchronize(ops.allgather_async(payload, name=f"{name}.t",
                                                   process_set=process_set))
    out, offset = [], 0
    for n in sizes.tolist():
        out.append(_from_bytes_tensor(gathered[offset:offset + n]))
        offset += n
    return out


# ---- optimizer state -----------------------------------------------------------------------

@dataclass(frozen=True)
class _TensorSlot:
    """Stands for one tensor of the root's optimizer state in the broadcast skeleton."""
    index: int
    path: str
    shape: tuple
    dtype: str
    on_cpu: bool


def _split(obj: Any, tensors: list[torch.Tensor], path: str) -> Any:
    """Replace every tensor inside ``obj`` by a :class:`_TensorSlot`, collecting the tensors."""
    if isinstance(obj, torch.Tensor):
        tensors.append(obj)
        return _TensorSlot(len(tensors) - 1, path, tuple(obj.shape),
                           str(obj.dtype).replace("torch.", ""), obj.device.type == "cpu")
    if isinstance(obj, dict):
        return {k: _split(v, tensors, f"{path}.{k}") for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_split(v, tensors, f"{path}.{i}") for i, v in enumerate(obj))
    return obj


def _fill(obj: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(obj, _TensorSlot):
        return tensors[obj.index]
    if isinstance(obj, dict):
        return {k: _fill(v, tensors) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_fill(v, tensors) for v in obj)
    return obj


def _slots(obj: Any, out: list[_TensorSlot]) -> list[_TensorSlot]:
    if isinstance(obj, _TensorSlot):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _slots(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _slots(v, out)
    return out


def broadcast_optimizer_state(optimizer: torch.optim.Optimizer, root_rank: int = 0,
                              model: torch.nn.Module | None = None, process_set: ProcessSet | None = None) -> None:
    """Make every rank's optimizer state (hyper-parameters, per-parameter state, step counts)
    equal to ``root_rank``'s.

    Works for every ``torch.optim`` optimizer: the root's ``state_dict()`` structure travels as a
    pickled skeleton, its tensors travel as in-place tensor broadcasts, and the other ranks load the
    result. As in Horovod, an optimizer without state yet (state is built lazily by the first
    ``step()``) first takes one step on zero gradients, so that its state exists; ``model`` names
    the sparse embeddings whose zero gradients must be sparse for that step.
    """
    if not optimizer.state_dict()["state"]:
        _create_state(optimizer, model)
    is_root = ops.is_root(root_rank, process_set)
    tensors: list[torch.Tensor] = []
    skeleton = _split(optimizer.state_dict(), tensors, "optimizer") if is_root else None
    skeleton = broadcast_object(skeleton, root_rank, name="optimizer_state.skeleton",
                                process_set=process_set)
    slots = sorted(_slots(skeleton, []), key=lambda s: s.index)
    if not is_root:
        device = _param_device(optimizer)
        tensors = [torch.empty(s.shape, dtype=getattr(torch, s.dtype),
                               device="cpu" if s.on_cpu else device) for s in slots]
    handles, flats = [], []
    for slot, t in zip(slots, tensors):
        flat = t.reshape(-1)          # a view for contiguous state; 0-d step counters become 1-d
        flats.append(flat)
        handles.append(ops.broadcast_async_(flat, root_rank, name=slot.path,
                                            process_set=process_set))
    for h, flat, t in zip(handles, flats, tensors):
        ops.synchronize(h)
        if flat.data_ptr() != t.data_ptr():
            t.copy_(flat.reshape(t.shape))
    if not is_root:
        optimizer.load_state_dict(_fill(skeleton, tensors))


def _create_state(optimizer: torch.optim.Optimizer, model: torch.nn.Module | None) -> None:
    """One ``step()`` on zero gradients (sparse ones for SparseAdam and sparse embeddings). The
    parameters are put back afterwards: weight decay would move them even with zero gradients,
    away from what ``broadcast_parameters`` made equal."""
    if isinstance(optimizer, torch.optim.LBFGS):   # its step needs a closure: the root's state
        return                                      # (or none) is what every rank gets
    sparse = {id(p) for m in (model.modules() if model is not None else ())
              if isinstance(m, torch.nn.Embedding) and m.sparse for p in m.parameters()}
    params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
    for p in params:
        grad = torch.zeros_like(p)
        p.grad = grad.to_sparse() if isinstance(optimizer, torch.optim.SparseAdam) or id(p) in sparse else grad
    saved = [p.detach().clone() for p in params]
    try:
        # a DistributedOptimizer steps locally: an allreduce here would need every rank to step
        getattr(optimizer, "_local_step", optimizer.step)()
    except Exception as exc:   # raising on this rank alone would leave the others waiting
        warnings.warn(f"broadcast_optimizer_state: {type(optimizer).__name__} could not create "
                      f"its state with a zero-gradient step ({exc}); it takes the root's "
                      "state as it is", stacklevel=3)
    with torch.no_grad():
        for p, value in zip(params, saved):
            p.copy_(value)


def _param_device(optimizer: torch.optim.Optimizer) -> torch.device:
    for group in optimizer.param_groups:
        for p in group["params"]:
            return p.device
    return torch.device("cpu")
