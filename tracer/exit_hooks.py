"""Finish the timeline at exit: atexit, SIGTERM and SIGINT (chained to the previous handlers).

SIGINT only flushes (a KeyboardInterrupt may be caught and training go on); SIGTERM finishes the
file, then does what the previous handler would have done (the default: die by SIGTERM).
The flush itself happens on the writer thread; the handler waits for it a bounded time.
"""
from __future__ import annotations

import atexit
import os
import signal
import threading

_installed = False
_previous: dict = {}
_targets = {"flush": None, "close": None}


def install(flush, close) -> None:
    """Route exit events to ``flush()``/``close()`` (callables that find the current recorder)."""
    global _installed
    _targets["flush"], _targets["close"] = flush, close
    if _installed:
        return
    _installed = True
    atexit.register(_at_exit)
    if threading.current_thread() is not threading.main_thread():
        return   # signal handlers can only be set from the main thread; atexit still applies
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            _previous[sig] = signal.getsignal(sig)
            signal.signal(sig, _on_signal)
        except (ValueError, OSError):
            pass


def _at_exit() -> None:
    if _targets["close"]:
        _targets["close"]()


def _on_signal(signum, frame) -> None:
    prev = _previous.get(signum)
    if signum == signal.SIGTERM:
        if _targets["close"]:
            _targets["close"]()
    elif _targets["flush"]:
        _targets["flush"]()
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_IGN:
        return
    else:  # SIG_DFL (or unknown): restore the default action and re-deliver
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
