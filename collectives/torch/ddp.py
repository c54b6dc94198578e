"""``hvd.timeline.watch(ddp_model)``: a torch DistributedDataParallel job traced without our runtime
(no ``hvd.init()``, no MPI; docs/DDP.md).

With ``RINGSCOPE_TIMELINE`` set, the first watch starts this rank's timeline (run meta ``source``
"ddp", the rank and size of DDP's process group, DDP's settings, the clock offset measured over the
job's own process group) and finishes it at exit or at ``destroy_process_group()``. On the module:

- FORWARD for each call (:class:`collectives.timeline.Watch`);
- every bucket's reduction (:class:`collectives.torch.ddp_hook.BucketHook`), registered as DDP's
  communication hook around the hook already set, or torch's ``allreduce_hook`` when none is;
- BACKWARD from the first gradient of a backward pass (the forward output's) to the end of its
  reduction, and in it SYNCHRONIZE, the training thread's wait for the buckets at the pass's end;
- OPTIMIZER_STEP around the step of ``optimizer``, or else of the first optimizer seen stepping the
  module's parameters (torch's global step hooks), and the step advanced after it.

Every rank must call watch (the clock offset is collective). With the timeline unset, only FORWARD's
hooks are added, and they record nothing.
"""
from __future__ import annotations

import os
import socket
import warnings
import weakref
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d
from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel
from torch.nn.parallel import DistributedDataParallel
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

import tracer
from collectives.timeline import Watch, close_span, open_span
from collectives.torch import ddp_clock, ddp_collectives
from collectives.torch.ddp_hook import BucketHook
from tracer import vocab as V
from tracer.config import settings_from_env

_engine: Any = torch.autograd.Variable._execution_engine   # queue_callback: run at a pass's end
Watched = DistributedDataParallel | FSDPModule | FullyShardedDataParallel   # FSDP1's FullyShardedDataParallel


class DdpWatch(Watch):
    """The hooks :func:`watch` put on a DDP module, or an FSDP root module (FSDP2's ``fully_shard`` or FSDP1's
    FullyShardedDataParallel: no buckets;
    its all-gathers and reduce-scatters are recorded as collectives). The communication hook stays,
    recording nothing, after ``remove()``: a reducer keeps the hook it was given."""

    def __init__(self, ddp: Watched, optimizer: torch.optim.Optimizer | None = None) -> None:
        super().__init__(ddp)
        self.ddp = ddp
        self.phase: str | None = None    # "forward" or "backward" while one runs: the collectives' phase
        self.bucket_hook: BucketHook | None = None
        self._backward: Any = None       # the open BACKWARD span
        self._launched = False           # a bucket was launched in the open pass
        self._sync: Any = None           # the open SYNCHRONIZE: the pass's wait for its buckets
        self._step_span: Any = None
        self._optimizer: Any = None      # weakref to the optimizer whose steps are the phase
        if not start_timeline(ddp):
            return
        self._param_ids = {id(p) for p in ddp.parameters() if p.requires_grad}
        if isinstance(ddp, DistributedDataParallel):
            self.bucket_hook = install_hook(ddp, BucketHook(
                ddp.process_group, {id(p): n for n, p in ddp.module.named_parameters()}, ddp.bucket_bytes_cap,
                self._on_bucket))
        ddp_collectives.phase = lambda: self.phase
        self._handles += [ddp.register_forward_pre_hook(self._forward, prepend=True),
                          ddp.register_forward_hook(self._arm_backward, prepend=True)]   # before FSDP's
        if optimizer is not None:
            self._optimizer = weakref.ref(optimizer)
            self._handles += [optimizer.register_step_pre_hook(self._pre_step),
                              optimizer.register_step_post_hook(self._post_step)]
        else:
            self._handles += [register_optimizer_step_pre_hook(self._pre_step),
                              register_optimizer_step_post_hook(self._post_step)]

    # ---- BACKWARD: the first gradient of a pass to the end of its reduction ------------------------
    def _forward(self, module: Any, args: Any) -> None:
        self.phase = "forward"

    def _arm_backward(self, module: Any, args: Any, output: Any) -> None:
        """A hook on the forward's output: its gradient is the backward pass's first (one Python call a
        pass, where a hook per parameter would cost one per gradient). From here to the pass's end,
        collectives are the backward's: FSDP's hooks on the same output may gather before this one runs."""
        self.phase = "backward" if torch.is_grad_enabled() else None
        if tracer.get_recorder().enabled and torch.is_grad_enabled():
            for t in _tensors(output):
                if t.requires_grad:
                    t.register_hook(self._on_grad)

    def _on_grad(self, grad: Any = None) -> None:
        if self._backward is None:
            self._backward = open_span(V.BACKWARD, V.CAT_PHASE, V.TID_FRAMEWORK)
            if self._backward is not None:
                _engine.queue_callback(self._end_of_pass)

    def _on_bucket(self) -> None:
        if self._backward is None:   # an output the forward hook could not see (not a tensor)
            self._on_grad()
        self._launched = True

    def _end_of_pass(self) -> None:
        # DDP queues its end of pass, which waits for every bucket, when the last bucket is launched:
        # after this callback. One queued from here runs after it.
        if self._launched:   # the training thread now waits for the buckets: exposed communication
            self._sync = open_span(V.SYNCHRONIZE, V.CAT_FRAMEWORK, V.TID_FRAMEWORK)
            _engine.queue_callback(self._close_backward)
        else:   # no bucket in this pass (no_sync)
            self._close_backward()

    def _close_backward(self) -> None:
        sync, opened, self._sync, self._backward, self._launched = self._sync, self._backward, None, None, False
        self.phase = None
        close_span(sync)
        close_span(opened)

    # ---- OPTIMIZER_STEP and the step count --------------------------------------------------------
    def _mine(self, opt: torch.optim.Optimizer) -> bool:
        known = self._optimizer() if self._optimizer is not None else None
        if known is None and any(id(p) in self._param_ids for g in opt.param_groups for p in g["params"]):
            self._optimizer, known = weakref.ref(opt), opt
        return known is opt

    def _pre_step(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if self._mine(opt):
            self._close_backward()   # left open only by a backward pass that raised
            self._step_span = open_span(V.OPTIMIZER_STEP, V.CAT_PHASE, V.TID_FRAMEWORK)

    def _post_step(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if self._mine(opt):
            opened, self._step_span = self._step_span, None
            close_span(opened)
            tracer.mark_step()

    def remove(self) -> None:
        super().remove()
        if self.bucket_hook is not None:
            self.bucket_hook.on_bucket = _nothing
            self.bucket_hook.recording = False


def _nothing() -> None:
    pass


def _tensors(output: Any) -> list:
    """The tensors of a forward's output: itself, or those in a tuple, list or dict of it."""
    if isinstance(output, torch.Tensor):
        return [output]
    items = output.values() if isinstance(output, dict) else output if isinstance(output, (tuple, list)) else ()
    return [t for t in items if isinstance(t, torch.Tensor)]


def install_hook(ddp: DistributedDataParallel, hook: BucketHook) -> BucketHook:
    """Make ``hook`` DDP's communication hook, around the one registered before (a reducer takes one
    hook once: it is rebuilt as torch's ``__setstate__`` rebuilds it, then given ``hook``) or after
    (the module's ``register_comm_hook`` then hands it to ``hook``)."""
    registered = list(ddp._comm_hooks)
    if registered and isinstance(registered[-1][0], BucketHook):   # watched before
        return registered[-1][0]
    if len(registered) > 1:
        raise ValueError(f"the DDP module has {len(registered)} communication hooks; watch wraps one")
    if not registered and ddp._get_ddp_logging_data().get("comm_hook"):
        warnings.warn("ringscope: the DDP module has a built-in communication hook, which cannot be "
                      "wrapped: its buckets are not traced", stacklevel=3)
        return hook
    if registered:
        hook.wrap(*registered[0])
        _rebuild_reducer(ddp)
    ddp._comm_hooks = [(hook, None)]
    dist._register_comm_hook(ddp.reducer, None, hook)

    def register_comm_hook(state: object, inner: Any) -> None:   # a hook registered after: inside ours
        ddp._check_comm_hook(inner)
        hook.wrap(inner, state)

    ddp.register_comm_hook = register_comm_hook   # type: ignore[method-assign,assignment]
    return hook


def _rebuild_reducer(ddp: DistributedDataParallel) -> None:
    """A new reducer with the module's buckets and settings and no hook (torch's ``__setstate__``)."""
    ddp._remove_autograd_hooks()
    parameters, expect_sparse = ddp._build_params_for_reducer()
    ddp._ddp_init_helper(parameters, expect_sparse, ddp._build_debug_param_to_name_mapping(parameters),
                         ddp.static_graph)
    if ddp.static_graph:
        ddp.reducer._set_static_graph()
        if ddp.logger is not None:
            ddp.logger._set_static_graph()
    if ddp.mixed_precision is not None:
        ddp.reducer._set_mixed_precision_param_dtype(ddp.mixed_precision.param_dtype)


# ---- the timeline of a job without our runtime -------------------------------------------------------
_destroy: dict[str, Any] = {}   # the original destroy_process_group while ours is installed


def start_timeline(ddp: Watched) -> bool:
    """Start this rank's timeline for a DDP or FSDP job unless one is configured (hvd.init, an earlier
    watch), and record torch.distributed's collectives; True when a timeline records or may record
    (DYNAMIC), False when the environment asks for none."""
    if tracer.configured():
        on = tracer.get_recorder().enabled or tracer.dynamic()
        if on:
            ddp_collectives.install()
        return on
    if settings_from_env().spec is None:
        return False
    ddp_collectives.install()
    group = (ddp.process_group if isinstance(ddp, (DistributedDataParallel, FullyShardedDataParallel))
             else distributed_c10d._get_default_group())
    clock_group = group if dist.get_backend(group) == "gloo" else dist.new_group(backend="gloo")
    offset, unc = ddp_clock.measure(clock_group)
    tracer.configure(_meta(ddp, group, offset, unc))
    tracer.get_recorder().set_clock_offset(offset, unc, "init")
    _close_at_destroy()
    return True


def _meta(ddp: Watched, group: dist.ProcessGroup, offset: int, unc: int) -> dict:
    size = dist.get_world_size(group)
    env = os.environ
    common = {"rank": dist.get_rank(group), "size": size,
              "local_rank": int(env["LOCAL_RANK"]) if "LOCAL_RANK" in env else None,
              "local_size": int(env["LOCAL_WORLD_SIZE"]) if "LOCAL_WORLD_SIZE" in env else None,
              "host": socket.gethostname(), "pid": os.getpid(), "backend": str(dist.get_backend(group)),
              "clock_offset_ns": offset, "clock_offset_uncertainty_ns": unc,
              "process_sets": {0: list(range(size))}}
    if not isinstance(ddp, DistributedDataParallel):
        return {**common, "source": V.SOURCE_FSDP}
    hooks = ddp._comm_hooks
    return {**common, "fusion_threshold": int(ddp.bucket_bytes_cap), "source": V.SOURCE_DDP,
            "ddp": {"bucket_cap_bytes": int(ddp.bucket_bytes_cap),
                    "first_bucket_cap_bytes": int(ddp._bucket_config.first_bucket_bytes_cap),
                    "gradient_as_bucket_view": bool(ddp.gradient_as_bucket_view),
                    "static_graph": bool(ddp.static_graph),
                    "find_unused_parameters": bool(ddp.find_unused_parameters),
                    "comm_hook": getattr(hooks[0][0], "__qualname__", None) if hooks else None,
                    # registration order: whatif --bucket-cap-mb re-buckets them (viewer/whatif/buckets.py)
                    "params": [[n, p.numel() * p.element_size()] for n, p in ddp.module.named_parameters()
                               if p.requires_grad]}}


def _close_at_destroy() -> None:
    """``destroy_process_group()`` (of the default group) finishes the timeline first."""
    if _destroy:
        return
    original = _destroy["fn"] = dist.destroy_process_group

    def destroy_process_group(group: dist.ProcessGroup | None = None) -> None:
        if group is None or group is distributed_c10d._get_default_group():
            tracer.close()
        original(group)

    destroy_process_group.__doc__ = original.__doc__
    dist.destroy_process_group = distributed_c10d.destroy_process_group = destroy_process_group
