"""ringscope's tracer: the event vocabulary and the per-rank Chrome-trace timeline writer."""
from tracer.recorder import get_recorder, set_recorder  # noqa: F401

__version__ = "0.1.0"
