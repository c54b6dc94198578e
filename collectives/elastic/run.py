"""``elastic.run``: the decorator around an elastic job's training function.

Under ringscope's driver each world runs the function once. A world that follows a reset first
restores the last committed state (rank 0 fetches it from the driver, ``sync()`` hands it to every
rank), calls the reset callbacks, and continues the step numbers from the commit; its first step
ends the rank's ELASTIC_RESET slice. When a commit reports new hosts, every rank says goodbye and
exits cleanly, and the driver starts the larger world. Outside a driver the function just runs
(after a ``sync()``), as a plain ``mpiexec`` launch of a Horovod elastic script would.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import tracer
from collectives.elastic import worker
from collectives.elastic.state import State
from collectives.exceptions import HostsUpdatedInterrupt
from collectives.runtime import rank
from tracer import vocab


def run(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``func(state, *args, **kwargs)``; call the result with the job's State."""

    @functools.wraps(func)
    def wrapper(state: State, *args: Any, **kwargs: Any) -> Any:
        conn = worker.connection()
        if conn is None or conn.closed:
            state.sync()
            return func(state, *args, **kwargs)
        if conn.reset:
            _restore(state, conn)
        else:
            state.sync()
        try:
            result = func(state, *args, **kwargs)
        except HostsUpdatedInterrupt:
            conn.goodbye("hosts_updated")
            raise SystemExit(0) from None
        except Exception as exc:   # an error of the job, not a lost rank: the driver stops it
            conn.goodbye("abort", f"{type(exc).__name__}: {exc}")
            raise
        conn.goodbye("done")
        return result

    return wrapper


def _restore(state: State, conn: worker.Connection) -> None:
    """Fetch (rank 0), restore and sync the committed state; then the reset callbacks."""
    rec = tracer.get_recorder()
    t0 = rec.now()
    nbytes = int(conn.reset.get("state_bytes") or 0) if conn.reset else 0
    if rank() == 0 and nbytes:
        _, blob = conn.request({"op": "fetch"})
        state.from_bytes(blob)
    state.sync()
    state.save()   # every rank's restore() now goes back to the committed state
    conn.request({"op": "restored", "epoch_ns": time.time_ns()})
    rec.complete(vocab.TID_FRAMEWORK, vocab.ELASTIC_RESTORE, vocab.CAT_ELASTIC, t0, rec.now(),
                 {vocab.ARG_BYTES: nbytes})
    state.on_reset()
    tracer.begin_step(conn.step_base)
    t_init = getattr(rec, "base_ns", t0)
    tracer.after_next_step(lambda: _first_step_done(conn, t_init))


def _first_step_done(conn: worker.Connection, t_init: int) -> None:
    """Report the end of the first step after the restore; record the ELASTIC_RESET slice."""
    end_epoch = time.time_ns()
    rec = tracer.get_recorder()
    t_end = rec.now()
    try:
        record, _ = conn.request({"op": "first_step", "epoch_ns": end_epoch})
    except (OSError, ConnectionError):
        return
    record.pop("op", None)
    rec.complete(vocab.TID_FRAMEWORK, vocab.ELASTIC_RESET, vocab.CAT_ELASTIC, t_init, t_end,
                 reset_args(record, end_epoch, conn.generation))


def _ms(a: int | None, b: int | None) -> float | None:
    return None if a is None or b is None else round((b - a) / 1e6, 3)


def reset_args(record: dict[str, Any], first_step_end_ns: int, generation: int) -> dict[str, Any]:
    """The ELASTIC_RESET slice's args: the driver's reset record without its epoch times, plus
    the phases in ms (this rank's first step end; the driver's record keeps the max over ranks)."""
    args = {k: v for k, v in record.items() if not k.endswith("_epoch_ns")}
    failed, detected = record.get("failed_epoch_ns"), record.get("detected_epoch_ns")
    reformed, restored = record.get("reformed_epoch_ns"), record.get("restored_epoch_ns")
    args.update(detect_ms=_ms(failed, detected), reform_ms=_ms(detected, reformed),
                restore_ms=_ms(reformed, restored), first_step_ms=_ms(restored, first_step_end_ns),
                lost_ms=_ms(failed, first_step_end_ns),
                redone_ms=_ms(record.get("last_commit_epoch_ns"), failed), generation=generation)
    return args
