"""What the training loop did between collectives, in the timeline: ``hvd.timeline`` (``rs.timeline``).

    with hvd.timeline.region("augment"): ...          # or @hvd.timeline.region("augment")
    loader = hvd.timeline.wrap_loader(loader)          # DATA_WAIT: each wait for the next batch
    handle = hvd.timeline.watch(model)                 # FORWARD: each call of the root module
    with hvd.timeline.checkpoint(): torch.save(...)    # CHECKPOINT: saving or loading one

``DistributedOptimizer`` records BACKWARD and OPTIMIZER_STEP itself. Each is an X span (cat
``phase``, or ``region`` for a region) of the rank's trace and an NVTX range of the same name, on
the thread that ran it: the framework thread's go on TID_FRAMEWORK with STEP and SYNCHRONIZE,
another thread's on a tid of its own (``rec.thread_tid()``). With the timeline off each costs one
attribute read; none of them changes what the wrapped code computes. Works with or without torch;
the torch frontend's ``hvd.timeline`` (:mod:`collectives.torch.timeline`) adds ``profile()``.
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from tracer import vocab
from tracer.recorder import get_recorder

__all__ = ["region", "checkpoint", "wrap_loader", "watch", "TimedLoader", "Watch", "open_span", "close_span"]

F = TypeVar("F", bound=Callable[..., Any])


def open_span(name: str, cat: str, tid: int | None = None):
    """Open a span (on the calling thread's tid unless ``tid`` is given); returns what
    :func:`close_span` takes, None when the timeline is off. The span ends in the recorder that
    opened it, even if the timeline was restarted meanwhile."""
    rec = get_recorder()
    if not rec.enabled:
        return None
    tok = rec.begin(rec.thread_tid() if tid is None else tid, name, cat)
    return None if tok is None else (rec, tok)


def close_span(opened) -> None:
    if opened is not None:
        opened[0].end(opened[1])


class region:  # noqa: N801  (used like a function: ``with hvd.timeline.region("x")``)
    """A span named ``name`` (cat ``region``) around a block or each call of a function. Regions
    nest in each other and in phases, on any thread; one object may be entered by many threads."""

    __slots__ = ("name", "_open")
    CAT = vocab.CAT_REGION

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise ValueError(f"region name must be a non-empty string, not {name!r}")
        self.name = name
        self._open: dict[int, list] = {}   # thread ident -> its entries' spans (None: was off)

    def __enter__(self) -> region:
        self._open.setdefault(threading.get_ident(), []).append(open_span(self.name, self.CAT))
        return self

    def __exit__(self, *exc) -> bool:
        ident = threading.get_ident()
        stack = self._open[ident]
        close_span(stack.pop())
        if not stack:
            del self._open[ident]
        return False

    def __call__(self, fn: F) -> F:
        name, cat = self.name, self.CAT

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            opened = open_span(name, cat)
            try:
                return fn(*args, **kwargs)
            finally:
                close_span(opened)
        return timed  # type: ignore[return-value]


class checkpoint(region):  # noqa: N801
    """The CHECKPOINT phase around saving or loading a checkpoint (a block, or each call of a function),
    so the step's breakdown shows what checkpoints cost and which rank they slow."""

    __slots__ = ()
    CAT = vocab.CAT_PHASE

    def __init__(self):
        super().__init__(vocab.CHECKPOINT)


class TimedLoader:
    """An iterable whose iteration records DATA_WAIT around each ``next()`` of the wrapped one.
    Everything else is the wrapped object's: ``len()``, ``sampler``, ``dataset``, ``batch_size``,
    any attribute; ``set_epoch`` is the wrapped object's, or else its sampler's."""

    def __init__(self, iterable: Iterable):
        self.iterable = iterable

    def __iter__(self) -> Iterator:
        it = iter(self.iterable)   # a DataLoader starts its workers here
        while True:
            opened = open_span(vocab.DATA_WAIT, vocab.CAT_PHASE)
            try:
                batch = next(it)
            except StopIteration:
                return
            finally:
                close_span(opened)
            yield batch

    def __len__(self) -> int:
        return len(self.iterable)  # type: ignore[arg-type]

    def __bool__(self) -> bool:
        try:
            return len(self) > 0
        except TypeError:
            return True

    def __getattr__(self, name: str):
        if name == "iterable":   # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        inner = self.iterable
        if name == "set_epoch" and not hasattr(inner, "set_epoch"):
            sampler = getattr(inner, "sampler", None)
            if hasattr(sampler, "set_epoch"):   # DistributedSampler under a DataLoader
                return sampler.set_epoch
        return getattr(inner, name)

    def __repr__(self) -> str:
        return f"TimedLoader({self.iterable!r})"


def wrap_loader(iterable: Iterable) -> TimedLoader:
    """Wrap a DataLoader (any ``num_workers``) or any iterable: each wait of the training loop for
    its next batch becomes a DATA_WAIT span. The wait that ends the iteration is one too."""
    return TimedLoader(iterable)


class Watch:
    """The hooks :func:`watch` put on a module; ``remove()`` (or leaving a ``with``) takes them off."""

    def __init__(self, module):
        self._open: dict[int, list] = {}   # thread ident -> its calls' spans (None: was off)
        self._handles = [module.register_forward_pre_hook(self._before),
                         module.register_forward_hook(self._after, always_call=True)]

    def _before(self, module, args) -> None:
        self._open.setdefault(threading.get_ident(), []).append(open_span(vocab.FORWARD, vocab.CAT_PHASE))

    def _after(self, module, args, output) -> None:
        ident = threading.get_ident()
        stack = self._open.get(ident)
        if stack:   # a hook added during a call sees the call's end only
            close_span(stack.pop())
            if not stack:
                del self._open[ident]

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc) -> bool:
        self.remove()
        return False


def watch(model) -> Watch:
    """Record FORWARD for each call of ``model`` (a ``torch.nn.Module``, the root of the model),
    through a forward pre-hook and a forward hook that change nothing; returns the removable
    handle. A forward that raises still ends its span."""
    return Watch(model)
