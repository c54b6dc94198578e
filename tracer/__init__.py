"""ringscope's tracer: the event vocabulary and the per-rank Chrome-trace timeline writer.

Runtime-facing entry points (CONTRACT; the tracer engineer implements them):
    configure(meta)               read RINGSCOPE_TIMELINE / HOROVOD_TIMELINE etc., install the recorder;
                                  meta holds the run metadata (tracer.vocab.META_KEYS); raises
                                  TimelineConfigError with a one-line message on a bad path/value
    start_timeline(path, mark_cycles=False) / stop_timeline()
    mark_step(step=None)          advance the training step that events carry
    close()                       flush and finish the file (idempotent)
"""
from tracer.recorder import get_recorder, set_recorder  # noqa: F401

__version__ = "0.1.0"


class TimelineConfigError(ValueError):
    """A timeline setting (path, window, cap) that cannot be honoured."""


def configure(meta: dict):
    """Configure the timeline from the environment (placeholder until the writer lands)."""
    return get_recorder()


def start_timeline(path, mark_cycles=False):
    """Start recording to ``path`` at run time."""


def stop_timeline():
    """Stop recording and finish the file."""


def mark_step(step=None):
    """Advance (or set) the training step carried by subsequent events."""
    get_recorder().mark_step(step)


def close():
    """Flush and finish the timeline (idempotent)."""
    get_recorder().close()
