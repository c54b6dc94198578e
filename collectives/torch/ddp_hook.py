"""DDP's communication hook, recorded: :class:`BucketHook` runs the hook in force (the user's, else
torch's ``allreduce_hook``, which computes what DDP computes without a hook: each bucket divided by
the group's size, then summed) and writes each bucket
in the runtime's vocabulary, so the viewer reads it as it reads our fused allreduces:

- the bucket as a tensor op named ``bucket.<index>`` (its own tensor thread), from the hook's call
  (the bucket is ready on this rank) to the completion of the hook's future;
- a FUSED_RESPONSE over the same interval, listing the bucket and, in ``params``, the parameters
  it holds (``count`` of them), with its bytes, dtype, ``bucket`` index and DDP's bucket cap as
  ``threshold``;
- the collective (GLOO_ALLREDUCE, or <BACKEND>_ALLREDUCE) from the hook's return, when the
  collective has been queued, to the future's completion.

The response id counts the hook's calls in the process (all watched modules): DDP launches the
buckets in the same order on every rank, so the k-th call is the same collective everywhere (as
long as every rank trains the same modules in the same order). The future DDP gets is the inner hook's,
followed by a callback that records the bucket and hands the inner value on unchanged: the values
DDP writes into the gradients are the inner hook's.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from collectives.torch import ddp_collectives
from tracer import vocab as V
from tracer.recorder import get_recorder


class _BucketOp:
    """What ``rec.ops_done`` reads of an op (tracer/recorder.py: OPS)."""

    __slots__ = ("trace_key", "submit_ns", "stamp")

    def __init__(self, trace_key: tuple, submit_ns: int, stamp: tuple) -> None:
        self.trace_key, self.submit_ns, self.stamp = trace_key, submit_ns, stamp


_CALLS = itertools.count()   # response ids: unique in the process's trace, whichever module's bucket


class BucketHook:
    """Registered with the reducer as ``(state=None, hook=self)``; runs ``inner(state, bucket)``."""

    def __init__(self, group: dist.ProcessGroup, names: dict[int, str], bucket_cap: int,
                 on_bucket: Callable[[], None]) -> None:
        self.inner: Callable = default_hooks.allreduce_hook
        self.state: Any = group
        self.group = group
        self.averages = True            # DDP's own reduction averages; a user's hook says nothing
        self.names = names              # id(parameter) -> its name in the module
        self.bucket_cap = int(bucket_cap)
        self.size = dist.get_world_size(group)
        self.backend = str(dist.get_backend(group)).lower()
        self.activity = f"{self.backend.upper()}_ALLREDUCE"
        self.on_bucket = on_bucket      # the backward phase's: a bucket was launched in this pass
        self.recording = True           # False once the watch is removed
        self.__qualname__ = type(self).__qualname__   # DDP's logger names a hook by it

    def wrap(self, hook: Callable, state: Any) -> None:
        """Run ``hook(state, bucket)`` (the user's) instead of torch's ``allreduce_hook``."""
        self.inner, self.state, self.averages = hook, state, False

    def __call__(self, state: Any, bucket: Any) -> torch.futures.Future:
        response = next(_CALLS)
        rec = get_recorder()
        # not a GradBucket: (grad, param) from compiled DDP's per-parameter hooks
        if not (rec.enabled and self.recording) or not isinstance(bucket, dist.GradBucket):
            return self.inner(self.state, bucket)
        t_ready = rec.now()
        step = rec.step
        self.on_bucket()
        buf = bucket.buffer()
        if self.averages:   # allreduce_hook with our callback for its own: one Python callback, as without watch
            buf.div_(self.size)
            fut = ddp_collectives.unrecorded(dist.all_reduce, buf, group=self.group, async_op=True).get_future()
        else:
            fut = ddp_collectives.unrecorded(self.inner, self.state, bucket)
        t_queued = rec.now()
        index = bucket.index()
        params = [self.names.get(id(p), "?") for p in bucket.parameters()]
        shape = (buf.numel(), buf.element_size())
        dtype = str(buf.dtype).removeprefix("torch.")
        return fut.then(lambda f: self._done(f, rec, step, response, index, params, shape, dtype, t_ready, t_queued,
                                             self.averages))

    def _done(self, fut: torch.futures.Future, rec: Any, step: int, response: int, index: int,
              params: list[str], shape: tuple[int, int], dtype: str, t_ready: int, t_queued: int,
              first: bool) -> Any:
        """On the thread that completed the inner future (gloo's): the bucket's events, then its value
        unchanged. DDP waits for this future, so the end is taken before DDP goes on (a callback added
        to the inner future may run much later, when the training thread lets go of the GIL). ``first``:
        the value is all_reduce's list, whose first tensor is the bucket (what allreduce_hook returns)."""
        t_done = rec.now()
        try:
            value = fut.value()
        except Exception as e:   # DDP raises it on the training thread; here it is recorded
            self._record(rec, step, response, index, params, shape, dtype, (t_ready, t_queued, t_done),
                         str(e).split("\n")[0])
            raise
        self._record(rec, step, response, index, params, shape, dtype, (t_ready, t_queued, t_done), None)
        return value[0] if first else value

    def _record(self, rec: Any, step: int, response: int, index: int, params: list[str], shape: tuple[int, int],
                dtype: str, times: tuple[int, int, int], error: str | None) -> None:
        t_ready, t_queued, t_done = times
        name = f"bucket.{index}"
        nbytes = shape[0] * shape[1]
        key = (name, V.ALLREDUCE, nbytes, dtype, (shape[0],), "Average" if self.averages else None, 0, 0)
        rec.ops_done([_BucketOp(key, t_ready, (rec, step))], t_done, error)
        rec.complete(V.TID_FUSION, V.FUSED_RESPONSE, V.CAT_FUSION, t_ready, t_done, {
            V.ARG_RESPONSE: response, V.ARG_TENSORS: [name], V.ARG_COUNT: len(params), V.ARG_BYTES: nbytes,
            V.ARG_DTYPE: dtype, V.ARG_OP: V.ALLREDUCE, V.ARG_BACKEND: self.backend,
            V.ARG_THRESHOLD: self.bucket_cap, V.ARG_PROCESS_SET: 0, V.ARG_STEP: step, V.ARG_QUEUE_NS: 0,
            V.ARG_BUCKET: index, V.ARG_PARAMS: params})
        rec.complete(V.TID_BACKEND, self.activity, V.CAT_COMM, t_queued, t_done, {
            V.ARG_RESPONSE: response, V.ARG_BYTES: nbytes, V.ARG_BACKEND: self.backend, "size": self.size,
            V.ARG_PROCESS_SET: 0, V.ARG_STEP: step})
