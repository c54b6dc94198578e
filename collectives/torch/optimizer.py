"""``DistributedOptimizer``: Horovod's gradient-averaging optimizer wrapper.

A post-accumulate-grad hook on every parameter starts an async allreduce as soon as that gradient is
ready, so communication overlaps the rest of the backward pass; ``step()`` waits for them all and then
runs the wrapped optimizer's update.
"""
from __future__ import annotations

import contextlib
import warnings

import torch

import tracer
from collectives.torch import mpi_ops as ops
from collectives.torch.compression import Compression


class _DistributedOptimizer(torch.optim.Optimizer):
    """Mixed into the wrapped optimizer's own class (see :func:`DistributedOptimizer`)."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self.op = ops.resolve_op(op)
        if gradient_predivide_factor != 1.0 and self.op != ops.Average:
            raise ValueError("gradient_predivide_factor only applies to op=Average")
        if int(backward_passes_per_step) < 1:
            raise ValueError("backward_passes_per_step must be at least 1")
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.gradient_predivide_factor = float(gradient_predivide_factor)
        self.process_set = process_set
        self._parameter_names = self._name_parameters(named_parameters)
        self._requires_update = [p for g in self.param_groups for p in g["params"]
                                 if p.requires_grad]
        self._delay = {p: self.backward_passes_per_step for p in self._requires_update}
        self._handles = {}          # param -> (handle or None, compression ctx)
        self._hook_handles = []
        self._synchronized = False
        self._should_synchronize = True
        self._register_hooks()

    # ---- naming ------------------------------------------------------------------------------
    def _name_parameters(self, named_parameters):
        all_params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is None:
            return {p: f"param.{i}" for i, p in enumerate(all_params)}
        named = list(named_parameters)
        if named and not isinstance(named[0], (tuple, list)):
            raise ValueError("named_parameters should be a sequence of (name, parameter) pairs, "
                             "usually model.named_parameters()")
        names = [n for n, _ in named]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise ValueError(f"parameter names in named_parameters must be unique; repeated: {dups}")
        by_param = {p: n for n, p in named}
        unnamed = [i for i, p in enumerate(all_params) if p not in by_param]
        if unnamed:
            raise ValueError(f"named_parameters was given, but {len(unnamed)} optimizer "
                             "parameter(s) are not in it")
        return by_param

    # ---- hooks -------------------------------------------------------------------------------
    def _register_hooks(self):
        for p in self._requires_update:
            self._hook_handles.append(p.register_post_accumulate_grad_hook(self._on_grad_ready))

    def _on_grad_ready(self, p):
        if p in self._handles and self._handles[p][0] is not None:
            if self._delay[p] <= 0:
                raise AssertionError(
                    "gradients were computed more than backward_passes_per_step times before "
                    "step(); raise backward_passes_per_step to accumulate gradients locally")
        self._delay[p] -= 1
        if self._delay[p] == 0:
            self._handles[p] = self._allreduce_grad_async(p)
        else:
            self._handles[p] = (None, None)

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # another rank may have a gradient for it this step: take part with zeros
            p.grad = torch.zeros_like(p)
        compressed, ctx = self._compression.compress(p.grad)
        pre = post = 1.0
        if self.op == ops.Average:
            pre, post = 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        handle = ops.allreduce_async_(compressed, name=self._parameter_names[p], op=self.op,
                                      prescale_factor=pre, postscale_factor=post,
                                      process_set=self.process_set)
        return handle, ctx

    # ---- the Horovod API ---------------------------------------------------------------------
    def synchronize(self):
        """Wait for every gradient's allreduce (starting any that have not started) and write
        the averaged gradients into ``p.grad``."""
        rec = tracer.get_recorder()
        tok = rec.begin(tracer.vocab.TID_FRAMEWORK, tracer.vocab.SYNCHRONIZE,
                        tracer.vocab.CAT_FRAMEWORK, {"what": "DistributedOptimizer"}) \
            if rec.enabled else None
        try:
            for p in self._requires_update:
                if p not in self._handles or self._handles[p][0] is None:
                    self._handles[p] = self._allreduce_grad_async(p)
            for p, (handle, ctx) in self._handles.items():
                output = ops.synchronize(handle)
                self._delay[p] = self.backward_passes_per_step
                if output.data_ptr() != p.grad.data_ptr():
                    with torch.no_grad():
                        p.grad.copy_(self._compression.decompress(output, ctx))
        finally:
            self._handles.clear()
            if tok is not None:
                rec.end(tok)
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Inside this block ``step()`` does not synchronize (call ``synchronize()`` yourself)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                # reducing already-reduced gradients again would be wasted (or, for op=Sum, wrong)
                warnings.warn("optimizer.step() called after optimizer.synchronize() outside "
                              "optimizer.skip_synchronize(); the gradients are used as already "
                              "reduced, wrap step() in skip_synchronize() to silence this")
            else:
                self.synchronize()
        self._synchronized = False
        result = super(self.__class__, self).step(closure)
        tracer.mark_step()
        return result

    def zero_grad(self, set_to_none: bool = True):
        if any(h is not None for h, _ in self._handles.values()):
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                                 "optimizer.step() or optimizer.synchronize(); that would race "
                                 "with the gradients' allreduce")
        return super(self.__class__, self).zero_grad(set_to_none=set_to_none)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=ops.Average, gradient_predivide_factor=1.0,
                         process_set=None):
    """Wrap a ``torch.optim`` optimizer so that gradients are averaged across ranks.

    The result is an instance of the optimizer's own class (``isinstance`` still holds) carrying
    the wrapped optimizer's param groups and state.
    """
    if op is ops.Adasum:
        ops.resolve_op(op)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    dist = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, process_set)
    dist.state.update(optimizer.state)
    return dist
