"""The backends by name: ``register_backend(name, factory)``, ``get_backend(name, config)``.

``ring`` and ``mpi`` are built in; ``nccl`` and ``gloo`` register when ``collectives.torch`` is
imported. A backend is made on first use, on the engine thread.
"""
from __future__ import annotations

import threading

_FACTORIES: dict = {}
_INSTANCES: dict = {}
_LOCK = threading.Lock()
BUILTIN = ("ring", "mpi")


def register_backend(name: str, factory) -> None:
    """Register ``factory(config) -> Backend`` under ``name`` (replacing any earlier one)."""
    with _LOCK:
        _FACTORIES[name] = factory
        _INSTANCES.pop(name, None)


def registered() -> list[str]:
    with _LOCK:
        return sorted(set(_FACTORIES) | set(BUILTIN))


def get_backend(name: str, config):
    """The backend instance for ``name``, created on first use."""
    with _LOCK:
        inst = _INSTANCES.get(name)
        if inst is not None:
            return inst
        factory = _FACTORIES.get(name)
    if factory is None:
        factory = _builtin(name)
    if factory is None:
        hint = " (import collectives.torch to enable it)" if name in ("nccl", "gloo") else ""
        raise ValueError(f"unknown backend {name!r}{hint}; registered: {', '.join(registered())}")
    inst = factory(config)
    with _LOCK:
        _INSTANCES[name] = inst
    return inst


def _builtin(name: str):
    # imported on first use: the built-in backends import numpy, which stays out of `import collectives`
    if name == "ring":
        from collectives.backends.ring import RingBackend
        return RingBackend
    if name == "mpi":
        from collectives.backends.mpi import MpiBackend
        return MpiBackend
    return None


def reset_instances() -> None:
    """Forget created backends (at shutdown); factories stay registered."""
    with _LOCK:
        insts = list(_INSTANCES.values())
        _INSTANCES.clear()
    for inst in insts:
        close = getattr(inst, "close", None)
        if close is not None:
            close()
