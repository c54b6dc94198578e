"""Process sets: named subsets of ranks, each with its own data communicator.

Set 0 is the global set. Every rank must register the same sets in the same order (``init`` does
this from its ``process_sets`` argument; ``add_process_set`` negotiates through the coordinator).
"""
from __future__ import annotations

import threading

# mpi4py.MPI is imported where it is used: importing it starts MPI, which collectives.init does first


class ProcessSet:
    """A static group of global ranks; pass it as ``process_set=`` to any op."""

    def __init__(self, ranks=None):
        self.ranks = None if ranks is None else sorted({int(r) for r in ranks})
        if self.ranks is not None and not self.ranks:
            raise ValueError("a process set needs at least one rank")
        self.process_set_id = None

    def _table(self):
        if self.process_set_id is None:
            raise ValueError(f"{self!r} is not registered; pass it to init() or add_process_set()")
        return TABLE.get(self.process_set_id)

    def size(self) -> int:
        return len(self._table().ranks)

    def rank(self) -> int:
        """This process's rank within the set (-1 when not a member)."""
        return self._table().rank

    def included(self) -> bool:
        return self._table().rank >= 0

    def __repr__(self):
        return f"ProcessSet(id={self.process_set_id}, ranks={self.ranks})"

    def __eq__(self, other):
        return isinstance(other, ProcessSet) and self.ranks == other.ranks

    def __hash__(self):
        return hash(tuple(self.ranks or ()))


class CommInfo:
    """What a backend gets about one process set: ``set_id``, global ``ranks``, this process's
    ``rank``/``size`` within it, its mpi4py data communicator ``mpi`` (None for non-members), and the
    ``response`` id of the collective being run (set by the engine before each call)."""

    __slots__ = ("set_id", "ranks", "rank", "size", "mpi", "response", "backend_state")

    def __init__(self, set_id, ranks, rank, mpi):
        self.set_id = set_id
        self.ranks = list(ranks)
        self.rank = rank
        self.size = len(self.ranks)
        self.mpi = mpi
        self.response = -1
        self.backend_state = {}   # per-backend caches (e.g. an NCCL communicator), keyed by name


class SetTable:
    """id -> CommInfo for every registered set, on this process."""

    def __init__(self):
        self._sets: dict[int, CommInfo] = {}
        self._lock = threading.Lock()
        self.next_id = 1

    def add(self, set_id: int, ranks, world_comm) -> CommInfo:
        """Create the set's communicator; collective over ``world_comm`` (every rank calls it)."""
        from mpi4py import MPI
        me = world_comm.Get_rank()
        color = 0 if me in ranks else MPI.UNDEFINED
        comm = world_comm.Split(color, me)
        info = CommInfo(set_id, ranks, ranks.index(me) if me in ranks else -1,
                        None if comm == MPI.COMM_NULL else comm)
        with self._lock:
            self._sets[set_id] = info
            self.next_id = max(self.next_id, set_id + 1)
        return info

    def get(self, set_id: int) -> CommInfo:
        with self._lock:
            info = self._sets.get(set_id)
        if info is None:
            raise ValueError(f"process set {set_id} is not registered")
        return info

    def find(self, ranks) -> int | None:
        with self._lock:
            for sid, info in self._sets.items():
                if info.ranks == list(ranks):
                    return sid
        return None

    def remove(self, set_id: int) -> None:
        with self._lock:
            info = self._sets.pop(set_id, None)
        if info is None:
            return
        for state in info.backend_state.values():
            close = getattr(state, "close", None)
            if close is not None:
                close()
        if info.mpi is not None:
            info.mpi.Free()

    def ids(self):
        with self._lock:
            return sorted(self._sets)

    def as_meta(self) -> dict:
        with self._lock:
            return {str(k): list(v.ranks) for k, v in sorted(self._sets.items())}

    def clear(self) -> None:
        for sid in self.ids():
            self.remove(sid)
        self.next_id = 1


TABLE = SetTable()
global_process_set = ProcessSet(None)
global_process_set.process_set_id = 0


def set_id_of(process_set) -> int:
    """Resolve ``process_set=`` (None, a ProcessSet or an int id) to a registered id."""
    if process_set is None:
        return 0
    if isinstance(process_set, int):
        TABLE.get(process_set)
        return process_set
    if isinstance(process_set, ProcessSet):
        if process_set.process_set_id is None:
            raise ValueError(f"{process_set!r} is not registered; pass it to init() or "
                             "add_process_set()")
        return process_set.process_set_id
    raise TypeError(f"process_set must be a ProcessSet, got {type(process_set).__name__}")
