"""``hvd.timeline``: :mod:`collectives.timeline`'s phases and regions, and ``profile()``
(:mod:`collectives.torch.profile`: torch.profiler's Kineto traces beside ours)."""
from collectives.timeline import TimedLoader, Watch, checkpoint, close_span, open_span, region, watch, wrap_loader
from collectives.torch.profile import profile

__all__ = ["region", "checkpoint", "wrap_loader", "watch", "profile", "TimedLoader", "Watch", "open_span", "close_span"]
