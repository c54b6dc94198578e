"""``TorchState(model, optimizer, **kwargs)``: a torch training's elastic state.

Models, optimizers, LR schedulers and :class:`ElasticSampler`\\ s among the arguments are saved as
their ``state_dict`` and synchronized with the torch broadcasts; everything else is a plain object
(:class:`ObjectState`). ``to_bytes`` is one ``torch.save`` of all of it.
"""
from __future__ import annotations

import copy
import io
from typing import Any

import torch

from collectives import runtime
from collectives.elastic.state import ObjectState
from collectives.torch.elastic.sampler import ElasticSampler
from collectives.torch.functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters


class _Handler:
    """Saves, restores and syncs one torch object through its state_dict."""

    def __init__(self, value: Any):
        self.value = value
        self.saved = copy.deepcopy(value.state_dict())

    def save(self) -> None:
        self.saved = copy.deepcopy(self.value.state_dict())

    def restore(self) -> None:
        self.value.load_state_dict(self.saved)

    def sync(self) -> None:
        self.value.load_state_dict(broadcast_object(self.value.state_dict(), root_rank=0,
                                                    name="elastic.state_dict"))


class _ModelHandler(_Handler):
    def sync(self) -> None:
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _OptimizerHandler(_Handler):
    def sync(self) -> None:
        broadcast_optimizer_state(self.value, root_rank=0)


def _handler(value: Any) -> _Handler | None:
    if isinstance(value, torch.nn.Module):
        return _ModelHandler(value)
    if isinstance(value, torch.optim.Optimizer):
        return _OptimizerHandler(value)
    if isinstance(value, (torch.optim.lr_scheduler.LRScheduler, ElasticSampler)):
        return _Handler(value)
    return None


def _torch_broadcast_object(obj: Any) -> Any:
    return broadcast_object(obj, root_rank=0, name="elastic.objects")


class TorchState(ObjectState):
    """State of a torch training: ``model``, ``optimizer`` and any other keyword arguments,
    each exposed as an attribute."""

    _handlers: dict[str, _Handler]

    def __init__(self, model: torch.nn.Module | None = None,
                 optimizer: torch.optim.Optimizer | None = None, **kwargs: Any):
        kwargs.update(model=model, optimizer=optimizer)
        handlers = {k: h for k, h in ((k, _handler(v)) for k, v in kwargs.items()) if h is not None}
        object.__setattr__(self, "_handlers", handlers)
        for name, h in handlers.items():
            object.__setattr__(self, name, h.value)
        plain = {k: v for k, v in kwargs.items() if k not in handlers}
        super().__init__(bcast_object=_torch_broadcast_object, get_rank=runtime.rank, **plain)

    def __setattr__(self, name: str, value: Any) -> None:
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:   # a new model/optimizer object replaces the tracked one
            handlers[name] = _handler(value)
        super().__setattr__(name, value)

    def save(self) -> None:
        for h in self._handlers.values():
            h.save()
        super().save()

    def restore(self) -> None:
        for h in self._handlers.values():
            h.restore()
        super().restore()

    def sync(self) -> None:
        for h in self._handlers.values():
            h.sync()
        super().sync()

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        torch.save({"handlers": {k: h.saved for k, h in self._handlers.items()},
                    "objects": self._saved_state}, buf)
        return buf.getvalue()

    def from_bytes(self, data: bytes) -> None:
        blob = torch.load(io.BytesIO(data), weights_only=False)   # our own driver's bytes
        for k, saved in blob["handlers"].items():
            if k in self._handlers:
                self._handlers[k].saved = saved
        self._saved_state = blob["objects"]
        self.restore()
