"""The backend interface and the helpers backends share: the activity span, chunk bounds.

See docs/ARCHITECTURE.md, "Engine extension points", for the contract; the registry is
:mod:`collectives.backends.registry`.
"""
from __future__ import annotations

from tracer import get_recorder
from tracer import vocab as V


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


def chunk_bounds(n: int, parts: int) -> list[int]:
    """Offsets of ``parts`` near-equal chunks of ``n`` elements (len parts+1)."""
    q, r = divmod(n, parts)
    bounds = [0]
    for i in range(parts):
        bounds.append(bounds[-1] + q + (1 if i < r else 0))
    return bounds
