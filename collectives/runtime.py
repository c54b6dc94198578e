"""init/shutdown and the rank queries: MPI setup, process sets, clock sync, tracer, engine.

mpi4py.MPI is imported in ``init`` (importing it starts MPI, at the thread level set just before);
clock_sync and the hierarchical backend too, as they import numpy, which stays out of
``import collectives``.
"""
from __future__ import annotations

import atexit
import os
import socket
import sys
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import tracer
from collectives import config as _config
from collectives import engine as _engine
from collectives import fatal, mpi_wait
from collectives import messages as M
from collectives.backends.registry import get_backend, reset_instances
from collectives.elastic import worker
from collectives.entry import Entry
from collectives.process_sets import TABLE, ProcessSet, global_process_set, set_id_of
from tracer import vocab as _vocab

if TYPE_CHECKING:
    from types import ModuleType

    from mpi4py import MPI

# a process set to register: a ProcessSet, or the global ranks it holds
ProcessSetSpec: TypeAlias = "ProcessSet | Sequence[int]"

_state: dict[str, Any] = {}
_lock = threading.RLock()
_atexit_registered = False
_clock: dict[str, tuple[int, int]] = {}


def _mpi() -> ModuleType:
    if "mpi4py.MPI" not in sys.modules:
        import mpi4py
        mpi4py.rc.thread_level = "multiple"
    from mpi4py import MPI
    return MPI


def init(process_sets: Iterable[ProcessSetSpec] | str | None = None) -> None:
    """Start ringscope on every rank (collective). ``process_sets``: ProcessSets to register, or
    ``"dynamic"`` as Horovod takes it (sets may be added and removed at any time either way)."""
    global _atexit_registered
    with _lock:
        if _state:
            return
        if isinstance(process_sets, str):   # Horovod's "dynamic": add/remove_process_set, always on here
            if process_sets != "dynamic":
                raise ValueError(f"init(process_sets={process_sets!r}): ProcessSets, or 'dynamic'")
            process_sets = None
        fatal.install()
        cfg = _config.load()
        MPI = _mpi()
        if MPI.Query_thread() < MPI.THREAD_SERIALIZED:
            raise RuntimeError("MPI was initialised below MPI_THREAD_SERIALIZED; ringscope needs a "
                               "background thread for MPI (leave mpi4py.rc.thread_level alone)")
        world = MPI.COMM_WORLD
        from collectives import clock_sync
        mpi_wait.wait(world.Ibarrier())   # line ranks up so the blocking setup calls below are short
        rank, size = world.Get_rank(), world.Get_size()
        ctrl = world.Dup()
        TABLE.add(0, list(range(size)), world)
        global_process_set.ranks = list(range(size))
        for ps in process_sets or ():
            _register(ps, world, size)
        local = world.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
        local_rank, local_size = local.Get_rank(), local.Get_size()
        cross = world.Split(local_rank, rank)
        cross_rank, cross_size = cross.Get_rank(), cross.Get_size()
        hier = _hierarchical_meta(cfg, world, local)
        local.Free()
        cross.Free()
        offset, unc = clock_sync.measure(ctrl)
        meta = {"format_version": _vocab.FORMAT_VERSION, "version": tracer.__version__,
                "rank": rank, "size": size, "local_rank": local_rank, "local_size": local_size,
                "cross_rank": cross_rank, "cross_size": cross_size,
                "host": socket.gethostname(), "pid": os.getpid(), "backend": cfg.backend,
                "fusion_threshold": cfg.fusion_threshold, "cycle_time_ms": cfg.cycle_time_ms,
                "clock_offset_ns": offset, "clock_offset_uncertainty_ns": unc,
                "process_sets": TABLE.as_meta(), "mark_cycles": cfg.mark_cycles, **hier}
        tracer.configure(meta)
        tracer.get_recorder().set_clock_offset(offset, unc, "init")
        _clock["init"] = (offset, unc)
        _clock.pop("shutdown", None)
        get_backend(_config.cpu_backend(cfg), cfg)   # import it now, not inside the first op
        previous_switch = sys.getswitchinterval()
        if 0 < cfg.switch_interval_ms / 1000.0 < previous_switch:
            sys.setswitchinterval(cfg.switch_interval_ms / 1000.0)
        eng = _engine.Engine(cfg, world, ctrl, TABLE)
        eng.start()
        _engine.set_engine(eng)
        _state.update(config=cfg, ctrl=ctrl, rank=rank, size=size, local_rank=local_rank,
                      local_size=local_size, cross_rank=cross_rank, cross_size=cross_size,
                      engine=eng, previous_switch=previous_switch)
        if os.environ.get("RINGSCOPE_ELASTIC_DRIVER"):   # an elastic job: register with its driver
            worker.connect(rank, size)
        if not _atexit_registered:
            atexit.register(_at_exit)
            _atexit_registered = True


def _hierarchical_meta(cfg: _config.Config, world: MPI.Comm, local: MPI.Comm) -> dict[str, Any]:
    """Run meta: whether allreduces on the global set run host by host, and if asked for but not,
    why (``hierarchical_fallback``)."""
    from collectives.backends import hierarchical
    if not cfg.hierarchical_allreduce:
        return {"hierarchical_allreduce": False}
    if cfg.backend not in _config.CPU_BACKENDS:
        return {"hierarchical_allreduce": False,
                "hierarchical_fallback": f"the {cfg.backend} backend has no hierarchical allreduce"}
    reason = hierarchical.fallback_reason(hierarchical.host_counts(world, local))
    if reason is not None:
        return {"hierarchical_allreduce": False, "hierarchical_fallback": reason}
    return {"hierarchical_allreduce": True}


def _known(ps: ProcessSetSpec, size: int) -> tuple[ProcessSet, int | None]:
    """``(ps as a ProcessSet, its id if these ranks are registered already, else None)``; ranks
    outside the job raise ValueError."""
    if not isinstance(ps, ProcessSet):
        ps = ProcessSet(ps)
    bad = [r for r in ps.ranks if not 0 <= r < size]
    if bad:
        raise ValueError(f"process set {ps.ranks} names ranks {bad} outside 0..{size - 1}")
    existing = TABLE.find(ps.ranks)
    if existing is not None:
        ps.process_set_id = existing
    return ps, existing


def _register(ps: ProcessSetSpec, world: MPI.Comm, size: int) -> int:
    ps, existing = _known(ps, size)
    if existing is not None:
        return existing
    sid = TABLE.next_id
    TABLE.add(sid, ps.ranks, world)
    ps.process_set_id = sid
    return sid


def add_process_set(process_set: ProcessSetSpec) -> ProcessSet:
    """Register a process set after init (collective: every rank calls it in the same order)."""
    ps, existing = _known(process_set, _get("size"))
    if existing is not None:
        return ps
    eng = _engine.get_engine()
    n = _next_count("add_process_set")
    e = Entry(f"__add_process_set__.{n}", M.ADD_PROCESS_SET, None, None)
    e_shape = tuple(ps.ranks)
    h = eng.enqueue_control(e, e_shape)
    ps.process_set_id = h.wait()
    return ps


def remove_process_set(process_set: ProcessSet | int) -> None:
    """Unregister a process set added earlier (collective)."""
    sid = set_id_of(process_set)
    if sid == 0:
        raise ValueError("the global process set cannot be removed")
    n = _next_count("remove_process_set")
    e = Entry(f"__remove_process_set__.{n}", M.REMOVE_PROCESS_SET, None, None)
    _engine.get_engine().enqueue_control(e, (sid,)).wait()
    if isinstance(process_set, ProcessSet):
        process_set.process_set_id = None


def _next_count(key: str) -> int:
    counts = _state.setdefault("counts", {})
    counts[key] = counts.get(key, 0) + 1
    return counts[key] - 1


def shutdown() -> None:
    """Stop ringscope on every rank (collective); pending ops raise. Idempotent."""
    with _lock:
        if not _state:
            return
        eng = _state["engine"]
        eng.shutdown()
        _engine.set_engine(None)
        if not eng.fatal:
            from collectives import clock_sync
            offset, unc = clock_sync.measure(_state["ctrl"])
            tracer.get_recorder().set_clock_offset(offset, unc, "shutdown")
            _clock["shutdown"] = (offset, unc)
        tracer.close()
        reset_instances()
        TABLE.clear()
        _state["ctrl"].Free()
        sys.setswitchinterval(_state["previous_switch"])
        _state.clear()
        fatal.uninstall()


def _at_exit() -> None:
    if _state:
        shutdown()


def clock_offsets() -> dict[str, tuple[int, int]]:
    """{"init"|"shutdown": (offset_ns, uncertainty_ns)} as measured against rank 0."""
    return dict(_clock)


def is_initialized() -> bool:
    return bool(_state)


def _get(key: str) -> Any:
    if not _state:
        raise ValueError("ringscope is not initialized; call collectives.init() first")
    return _state[key]


def rank() -> int: return _get("rank")
def size() -> int: return _get("size")
def local_rank() -> int: return _get("local_rank")
def local_size() -> int: return _get("local_size")
def cross_rank() -> int: return _get("cross_rank")
def cross_size() -> int: return _get("cross_size")
def config() -> _config.Config: return _get("config")


def mark_step(step: int | None = None) -> None:
    """Advance (or set) the training step carried by later events."""
    tracer.mark_step(step)


def start_timeline(path: str | os.PathLike[str], mark_cycles: bool = False) -> None:
    """Start recording this rank's timeline to ``path`` (Horovod's ``start_timeline``)."""
    _get("rank")
    tracer.start_timeline(path, mark_cycles=mark_cycles)
    off = _clock.get("init")
    if off is not None:
        tracer.get_recorder().set_clock_offset(off[0], off[1], "init")


def stop_timeline() -> None:
    """Stop recording and finish the file."""
    tracer.stop_timeline()
