"""``State`` and ``ObjectState``: what an elastic job commits, restores and synchronizes.

As Horovod's: ``commit()`` saves the state and checks for new hosts; ``restore()`` goes back to the
last save; ``sync()`` makes every rank hold rank 0's state. Under ringscope's driver a commit is
also sent by rank 0 to the driver (``to_bytes``), so that a new world can start from it after a
reset (``from_bytes`` on rank 0, then ``sync()``); the commit returns only once the driver holds it.
"""
from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Iterable
from typing import Any

import tracer
from collectives import api, runtime
from collectives.elastic import worker
from collectives.exceptions import HostsUpdatedInterrupt
from tracer import vocab


def broadcast_object(obj: Any, root_rank: int = 0, name: str = "elastic.object") -> Any:
    """``root_rank``'s ``obj`` (anything picklable) on every rank, over the numpy collectives."""
    import numpy as np  # here: numpy stays out of `import collectives`
    is_root = runtime.rank() == root_rank
    data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8) if is_root else np.empty(0, np.uint8)
    n = api.broadcast(np.array([data.size], dtype=np.int64), root_rank, name=f"{name}.sz")
    if not is_root:
        data = np.empty(int(n[0]), dtype=np.uint8)
    data = api.broadcast(data, root_rank, name=f"{name}.t")
    return obj if is_root else pickle.loads(data.tobytes())


def _rank() -> int:
    return runtime.rank()


class State:
    """Base of the states an ``elastic.run`` function is given (subclasses: save/restore/sync and
    to_bytes/from_bytes)."""

    def __init__(self, bcast_object: Callable[[Any], Any] = broadcast_object,
                 get_rank: Callable[[], int] = _rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks: list[Callable[[], None]] = []

    def register_reset_callbacks(self, callbacks: Iterable[Callable[[], None]]) -> None:
        """Functions called after every reset (a rank lost or hosts added), once the state is
        restored: e.g. scale the learning rate by the new ``hvd.size()``."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self) -> None:
        for callback in self._reset_callbacks:
            callback()

    def commit(self) -> None:
        """Save the state (on the driver too, from rank 0), then check for new hosts: raises
        :class:`HostsUpdatedInterrupt` on every rank when the driver found some (collective)."""
        rec = tracer.get_recorder()
        t0 = rec.now()
        self.save()
        nbytes, updated = 0, False
        conn = worker.connection()
        if conn is not None and not conn.closed and self._rank() == 0:
            blob = self.to_bytes()
            nbytes = len(blob)
            # the first step not in this commit: what a new world's step numbers continue from
            reply, _ = conn.request({"op": "commit", "step": rec.step, "epoch_ns": _epoch_ns()}, blob)
            updated = bool(reply.get("hosts_updated"))
        rec.complete(vocab.TID_FRAMEWORK, vocab.ELASTIC_COMMIT, vocab.CAT_ELASTIC, t0, rec.now(),
                     {vocab.ARG_BYTES: nbytes})
        self._raise_if_updated(updated)

    def check_host_updates(self) -> None:
        """Raise :class:`HostsUpdatedInterrupt` on every rank when the driver found new hosts
        (collective: rank 0 asks the driver and broadcasts the answer)."""
        updated = False
        conn = worker.connection()
        if conn is not None and not conn.closed and self._rank() == 0:
            reply, _ = conn.request({"op": "hosts"})
            updated = bool(reply.get("hosts_updated"))
        self._raise_if_updated(updated)

    def _raise_if_updated(self, updated: bool) -> None:
        if self._bcast_object(updated):
            raise HostsUpdatedInterrupt(False)

    def save(self) -> None:
        """Keep the current state as the one ``restore()`` goes back to."""
        raise NotImplementedError

    def restore(self) -> None:
        """Undo every change since the last ``save()``/``commit()``."""
        raise NotImplementedError

    def sync(self) -> None:
        """Make every rank hold rank 0's state (collective)."""
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        """The saved state, serialized (what rank 0 hands the driver at a commit)."""
        raise NotImplementedError

    def from_bytes(self, data: bytes) -> None:
        """Make ``data`` (from :meth:`to_bytes`) the saved state and restore it."""
        raise NotImplementedError


def _epoch_ns() -> int:
    return time.time_ns()


class ObjectState(State):
    """State made of plain picklable objects, given as keyword arguments and exposed as
    attributes (``state.epoch``, ``state.batch``, ...)."""

    def __init__(self, bcast_object: Callable[[Any], Any] = broadcast_object,
                 get_rank: Callable[[], int] = _rank, **kwargs: Any):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self) -> None:
        self._saved_state = {k: getattr(self, k) for k in self._saved_state}

    def restore(self) -> None:
        self._set_attrs()

    def sync(self) -> None:
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def to_bytes(self) -> bytes:
        return pickle.dumps(self._saved_state)

    def from_bytes(self, data: bytes) -> None:
        self._saved_state = pickle.loads(data)
        self.restore()

    def _set_attrs(self) -> None:
        for attr, value in self._saved_state.items():
            setattr(self, attr, value)
