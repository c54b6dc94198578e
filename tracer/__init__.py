"""ringscope's tracer: the event vocabulary and the per-rank Chrome-trace timeline writer.

Runtime-facing entry points:
    configured(), dynamic()       whether configure ran; whether its setting is DYNAMIC
    configure(meta)               read RINGSCOPE_TIMELINE / HOROVOD_TIMELINE etc., install the recorder;
                                  meta holds the run metadata (tracer.vocab.META_KEYS); raises
                                  TimelineConfigError with a one-line message on a bad path/value
    start_timeline(path, mark_cycles=False) / stop_timeline()
    mark_step(step=None)          advance the training step that events carry
    begin_step(step), after_next_step(fn)   an elastic restore: continue the step numbers; a hook
    close()                       flush and finish the file (idempotent)
    flush()                       write what is buffered now (tests; signal handlers)

Switches (environment): RINGSCOPE_TIMELINE (HOROVOD_TIMELINE), RINGSCOPE_TIMELINE_MARK_CYCLES,
RINGSCOPE_TIMELINE_STEPS, RINGSCOPE_TIMELINE_MAX_MB, RINGSCOPE_TIMELINE_CAP_MODE,
RINGSCOPE_TIMELINE_KEEP_PARTS, RINGSCOPE_TIMELINE_BUFFER_EVENTS, RINGSCOPE_TIMELINE_FLUSH_S,
RINGSCOPE_TIMELINE_COUNTERS_HZ,
RINGSCOPE_DISABLE_NVTX (HOROVOD_DISABLE_NVTX_RANGES, NVTX_DISABLE), RINGSCOPE_NVTX_ALWAYS.
See docs/TRACE_FORMAT.md.

:mod:`tracer.timeline` (the writer, its threads, orjson) is imported only when a timeline starts, and
:mod:`tracer.recorder` (the C module ``tracer._record``) on first use: the viewer imports ``tracer.vocab`` and
never needs the runtime's C module.
"""
from __future__ import annotations

import os
import socket
import sys
from typing import TYPE_CHECKING, Any

from tracer import exit_hooks, vocab
from tracer.config import TimelineConfigError, check_writable, rank_path, settings_from_env
from tracer.nvtx_emitter import load_emitter

if TYPE_CHECKING:
    from tracer.recorder import NullRecorder as NullRecorder
    from tracer.recorder import get_recorder as get_recorder
    from tracer.recorder import set_framework_thread as set_framework_thread
    from tracer.recorder import set_recorder as set_recorder

__version__ = "0.1.0"   # the one version: pyproject.toml reads it, traces carry it, `ringscope --version` prints it

_RECORDER_NAMES = ("NullRecorder", "get_recorder", "set_framework_thread", "set_recorder")


def __getattr__(name: str) -> Any:
    # tracer.get_recorder and its kin load the recorder on first access, then live in the module's dict
    # (no further cost on the runtime's calls); so does tracer._record, whose capsule the runtime's C core
    # imports (tracer/record_api.h)
    if name in _RECORDER_NAMES or name == "_record":
        from tracer import recorder
        globals().update({n: getattr(recorder, n) for n in _RECORDER_NAMES})
        return globals()[name]
    raise AttributeError(f"module 'tracer' has no attribute {name!r}")

_state = {"meta": None, "settings": None}


def _full_meta(meta: dict | None, settings) -> dict:
    m = {k: None for k in vocab.META_KEYS}
    m.update(format_version=vocab.FORMAT_VERSION, version=__version__, rank=0, size=1,
             host=socket.gethostname(), pid=os.getpid(), clock_offset_ns=0,
             clock_offset_uncertainty_ns=None, process_sets={0: None},
             **_cpus())
    m.update(meta or {})
    m["format_version"] = vocab.FORMAT_VERSION
    m["version"] = __version__
    return m


def _cpus() -> dict:
    if not hasattr(os, "sched_getaffinity"):
        return {"cpus": os.cpu_count()}
    ids = sorted(os.sched_getaffinity(0))
    return {"cpus": len(ids), "cpu_set": ids}


def _replace(new) -> None:
    from tracer.recorder import NullRecorder, get_recorder, set_recorder
    old = get_recorder()
    if new is not None:
        new.step = old.step
    if not isinstance(old, NullRecorder):
        old.close()
    set_recorder(new if new is not None else _null(old.step))


def _null(step: int) -> NullRecorder:
    from tracer.recorder import NullRecorder
    r = NullRecorder()
    r.step = step
    return r


def _start(path_spec: str, source: str, mark_cycles: bool | None):
    from tracer.recorder import get_recorder
    from tracer.timeline import open_recorder
    settings, meta = _state["settings"], _state["meta"]
    path = rank_path(path_spec, int(meta.get("rank") or 0), source)
    check_writable(path, source)
    try:
        rec = open_recorder(meta, settings, path, load_emitter(settings.nvtx, settings.nvtx_force),
                            step=get_recorder().step, mark_cycles=mark_cycles)
    except OSError as e:
        raise TimelineConfigError(f"{source}: cannot write timeline file {path}: "
                                  f"{e.strerror or e}") from None
    _replace(rec)
    exit_hooks.install(flush, close)
    return rec


def configure(meta: dict):
    """Configure the timeline from the environment and install the recorder; returns it. The
    calling thread becomes the framework thread (phases and regions there go on TID_FRAMEWORK)."""
    from tracer.recorder import get_recorder, set_framework_thread
    settings = settings_from_env()
    set_framework_thread()
    _state["settings"], _state["meta"] = settings, _full_meta(meta, settings)
    _replace(None)
    get_recorder().step = -1   # a new run starts before its first step
    if settings.spec is None or settings.dynamic:
        return get_recorder()
    return _start(settings.spec, settings.source, None)


def configured() -> bool:
    """True once :func:`configure` or :func:`start_timeline` ran in this process (a runtime, a watch)."""
    return _state["settings"] is not None


def dynamic() -> bool:
    """True when the configured setting is DYNAMIC: nothing records until start_timeline(path)."""
    return bool(_state["settings"] and _state["settings"].dynamic)


def start_timeline(path, mark_cycles=False):
    """Start recording to ``path`` at run time (same path rules as RINGSCOPE_TIMELINE)."""
    if _state["settings"] is None:
        _state["settings"], _state["meta"] = settings_from_env(), _full_meta(None, None)
    return _start(str(path), "start_timeline", bool(mark_cycles))


def stop_timeline():
    """Stop recording and finish the file (a no-op when nothing is recording)."""
    _replace(None)


def _after_fork_in_child() -> None:
    # A forked child (e.g. a data-loader worker) has no writer thread: it must not record.
    if "tracer.recorder" in sys.modules:
        from tracer.recorder import get_recorder, set_recorder
        set_recorder(_null(get_recorder().step))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


_after_step: list = []


def mark_step(step=None):
    """Advance (or set) the training step carried by subsequent events."""
    from tracer.recorder import get_recorder
    get_recorder().mark_step(step)
    if _after_step:
        hooks = _after_step[:]
        _after_step.clear()
        for fn in hooks:
            fn()


def after_next_step(fn) -> None:
    """Call ``fn()`` once, right after the next :func:`mark_step` (an elastic rank's first step
    after a restore ends its ELASTIC_RESET slice)."""
    _after_step.append(fn)


def begin_step(step):
    """Make ``step`` the current step from now on, without closing the one before as a STEP span
    (an elastic job's new world continues the step numbers of the committed state)."""
    from tracer.recorder import get_recorder
    rec = get_recorder()
    rec.step = -1
    rec.mark_step(int(step))


def flush(timeout: float = 5.0) -> bool:
    """Write everything buffered so far; True when it reached the file (or nothing records)."""
    from tracer.recorder import get_recorder
    rec = get_recorder()
    return rec.flush(timeout) if hasattr(rec, "flush") else True


def close():
    """Flush and finish the timeline (idempotent); later events go to a no-op recorder."""
    _replace(None)
