"""Backend registry, the backend interface, and the activity-span helper backends use.

See docs/ARCHITECTURE.md, "Engine extension points", for the contract.
"""
from __future__ import annotations

import threading

from tracer import get_recorder
from tracer import vocab as V

_FACTORIES: dict = {}
_INSTANCES: dict = {}
_LOCK = threading.Lock()


def register_backend(name: str, factory) -> None:
    """Register ``factory(config) -> Backend`` under ``name`` (replacing any earlier one)."""
    with _LOCK:
        _FACTORIES[name] = factory
        _INSTANCES.pop(name, None)


def registered() -> list[str]:
    with _LOCK:
        return sorted(_FACTORIES)


def get_backend(name: str, config):
    """The backend instance for ``name``, created on first use."""
    with _LOCK:
        inst = _INSTANCES.get(name)
        if inst is not None:
            return inst
        factory = _FACTORIES.get(name)
    if factory is None:
        _load_builtin(name)
        with _LOCK:
            factory = _FACTORIES.get(name)
    if factory is None:
        hint = " (import collectives.torch to enable it)" if name in ("nccl", "gloo") else ""
        raise ValueError(f"unknown backend {name!r}{hint}; registered: {', '.join(registered())}")
    inst = factory(config)
    with _LOCK:
        _INSTANCES[name] = inst
    return inst


def reset_instances() -> None:
    """Forget created backends (at shutdown); factories stay registered."""
    with _LOCK:
        insts = list(_INSTANCES.values())
        _INSTANCES.clear()
    for inst in insts:
        close = getattr(inst, "close", None)
        if close is not None:
            close()


def _load_builtin(name: str) -> None:
    if name == "ring":
        from collectives.backends import ring  # noqa: F401  (registers itself)
    elif name == "mpi":
        from collectives.backends import mpi  # noqa: F401


class Backend:
    """Interface. Buffers are flat 1-D buffers from the entry's adapter; ``comm`` is a
    :class:`collectives.process_sets.CommInfo`; ``op`` is Sum/Min/Max/Product (never Average)."""

    name = "abstract"

    def allreduce(self, buf, op, comm) -> None:
        raise NotImplementedError

    def allgather(self, send, recv, counts, comm) -> None:
        raise NotImplementedError

    def broadcast(self, buf, root, comm) -> None:
        raise NotImplementedError

    def alltoall(self, send, send_counts, recv, recv_counts, comm) -> None:
        raise NotImplementedError

    def reducescatter(self, send, recv, counts, op, comm) -> None:
        raise NotImplementedError

    def barrier(self, comm) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def activity(comm, name, nbytes, backend, extra=None):
    """``with activity(comm, "RING_ALLREDUCE", nbytes, "ring"):``: one X span on the backend
    thread, in the response the engine runs (``comm.response``), its args plus ``extra``; a no-op
    when nothing records."""
    rec = get_recorder()
    if not rec.enabled:
        return rec.span(V.TID_BACKEND, name, V.CAT_COMM)   # a no-op: no args built
    args = {V.ARG_RESPONSE: comm.response, V.ARG_BYTES: int(nbytes), V.ARG_BACKEND: backend,
            "size": comm.size, V.ARG_PROCESS_SET: comm.set_id, V.ARG_STEP: rec.step}
    if extra:
        args.update(extra)
    return rec.span(V.TID_BACKEND, name, V.CAT_COMM, args)
