"""The recorder contract (v2): the whole surface the runtime calls, declared here.

    rec = tracer.get_recorder()     # process-wide; a NullRecorder (enabled False, calls no-ops)
                                    # until a timeline is configured; fetch it per cycle/op, never
                                    # cache it across start_timeline/stop_timeline
    rec.enabled                     # bool: callers skip building args when False
    rec.step                        # current training step (-1 before the first)
    rec.now() -> int                # time.perf_counter_ns() (the recorders' clock)
    with rec.span(tid, name, cat, args=None): ...        # an X span from entry to exit (+ NVTX)
    tok = rec.begin(tid, name, cat, args=None, ts_ns=None); rec.end(tok, args=None)
                                    # an X span opened and closed by separate calls (any thread);
                                    # args given to end() are merged into the begin's
    rec.complete(tid, name, cat, t0_ns, t1_ns, args=None)   # an X span measured by the caller
    rec.instant(tid, name, cat, args=None, ts_ns=None)
    rec.counter(name, value, ts_ns=None)                    # a "C" event, one track per name
    rec.thread_tid()                # the tid for a phase or region of the calling thread:
                                    # TID_FRAMEWORK on the framework thread (see
                                    # set_framework_thread), else TID_USER_BASE + k, named after
                                    # the thread in the trace on its first use
    rec.ready(names, rank, process_set, ts_ns)              # one READY instant (coordinator)
    rec.ops_done(ops, t_done_ns, error=None)                # lifecycles of finished ops (OPS)
    rec.mark_step(step=None)
    rec.set_run_meta(**meta)                                # keys of tracer.vocab.META_KEYS
    rec.set_clock_offset(offset_ns, uncertainty_ns, when)   # when = "init" | "shutdown"
    rec.close()
    set_inflight(mapping_name_to_op)                        # module level: ops submitted, not done
    set_framework_thread(ident=None)                        # module level: the training thread

Every event but counters carries ``args.step``: the recorder adds the step of the call (of the
begin, for a span) when the args have none. ``rec.mark_cycles`` says whether the engine should
write CYCLE spans (a setting, read once per cycle).

OPS: an op (collectives.entry.Entry) carries ``trace_key`` (an immutable tuple ``(name, op_type,
nbytes, dtype, shape, reduce_op, process_set, priority)``), ``submit_ns`` (``rec.now()`` at
submission) and ``stamp`` (``(rec, step)`` when ``rec.enabled`` at submission, else None). An op's
end goes to the recorder of its stamp: ``ops_done`` records the ops this recorder stamped (one X
line each, on the tensor's own thread, from submit_ns to t_done) and returns the ops another
recorder stamped (None if none), for the caller to hand to theirs. It keeps only the trace_key,
the times, the step and the error. The writer writes the B line of every op still in the
``set_inflight`` mapping at each flush and at close (a hung op shows open); such an op's end is
then an E line.

Names, tids, cats and arg keys come from :mod:`tracer.vocab`.
"""
from __future__ import annotations

import threading
import time

from tracer import vocab
from tracer.native import load

_record = load("tracer._record")   # one line with the fix when the C module was not built
IDLE, current, set_current = _record.IDLE, _record.current, _record.set_current

_now = time.perf_counter_ns


class NullRecorder:
    """Records nothing; every call is a cheap no-op. Used when no timeline is configured."""

    enabled = False
    mark_cycles = False
    step = -1

    def now(self) -> int:
        return _now()

    def span(self, tid, name, cat, args=None):
        return IDLE

    def begin(self, tid, name, cat, args=None, ts_ns=None):
        return None

    def end(self, token, args=None):
        pass

    def complete(self, tid, name, cat, t0_ns, t1_ns, args=None):
        pass

    def instant(self, tid, name, cat, args=None, ts_ns=None):
        pass

    def counter(self, name, value, ts_ns=None):
        pass

    def thread_tid(self) -> int:
        return vocab.TID_FRAMEWORK

    def ready(self, names, rank, process_set, ts_ns=None):
        pass

    def ops_done(self, ops, t_done_ns, error=None):
        """Records nothing; returns the ops a recorder stamped (None if none)."""
        others = [op for op in ops if op.stamp is not None and op.stamp[0] is not self]
        return others or None

    def mark_step(self, step=None):
        self.step = self.step + 1 if step is None else int(step)

    def set_run_meta(self, **meta):
        pass

    def set_clock_offset(self, offset_ns, uncertainty_ns, when="init"):
        pass

    def close(self):
        pass


_inflight = None
_framework_ident: int | None = None


def set_framework_thread(ident: int | None = None) -> None:
    """Make the thread ``ident`` (default: the calling one) the framework thread, whose phases and
    regions go on TID_FRAMEWORK with STEP and SYNCHRONIZE. ``tracer.configure`` (run by ``init``)
    sets it; until then it is the main thread."""
    global _framework_ident
    _framework_ident = threading.get_ident() if ident is None else ident


def framework_thread() -> int:
    """The framework thread's ident (see :func:`set_framework_thread`)."""
    return threading.main_thread().ident if _framework_ident is None else _framework_ident


def set_inflight(ops_by_name) -> None:
    """The runtime's ops submitted and not finished (a dict name -> op, or None): the timeline's
    writer writes the B lines of those still in flight at each flush and at close (see OPS)."""
    global _inflight
    _inflight = ops_by_name


def inflight():
    """What :func:`set_inflight` was given (None when nothing)."""
    return _inflight


# get_recorder(): the process-wide recorder, a NullRecorder until a timeline is configured. It is
# kept in tracer._record, where the runtime's C core reads it too (tracer/record_api.h).
get_recorder = current


def set_recorder(recorder) -> None:
    """Install the process-wide recorder (the tracer's configure step calls this)."""
    set_current(recorder)


set_recorder(NullRecorder())
