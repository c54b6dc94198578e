"""``DistributedOptimizer``: Horovod's gradient-averaging optimizer wrapper.

A post-accumulate-grad hook on every parameter starts an async allreduce as soon as that gradient is
ready, so communication overlaps the rest of the backward pass; ``step()`` waits for them all and then
runs the wrapped optimizer's update. Sparse gradients are allgathered (indices and values) unless
``sparse_as_dense``; on a rank outside its ``process_set`` the optimizer is a plain local one.
With the timeline on, each backward pass is a BACKWARD span (from its first gradient hook to the
end of the pass, when its last gradient has been submitted) and each ``step()`` an OPTIMIZER_STEP
span, both on the framework thread's tid.
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, overload

import torch

import tracer
from collectives.timeline import close_span, open_span
from collectives.torch import mpi_ops as ops
from collectives.torch.compression import Compression, Compressor
from tracer import vocab

if TYPE_CHECKING:
    from collectives.api import OpArg
    from collectives.process_sets import ProcessSet

OptimizerT = TypeVar("OptimizerT", bound=torch.optim.Optimizer)
# Horovod's ``groups``: how many groups to split the parameters into, or the groups themselves
Groups: TypeAlias = "int | Sequence[Sequence[torch.Tensor]] | None"
# a gradient's pending reduction: its handle (or its group's handle and its index there), and the
# compressor's context
_Pending: TypeAlias = ("tuple[ops.Handle[torch.Tensor] | tuple[ops.Handle[list[torch.Tensor]], int] | None, "
                       "torch.dtype | None]")


class _DistributedOptimizer(torch.optim.Optimizer):
    """Mixed into the wrapped optimizer's own class (see :func:`DistributedOptimizer`)."""

    def __init__(self, params: Iterable[dict[str, Any]],
                 named_parameters: Iterable[tuple[str, torch.Tensor]] | None, compression: type[Compressor],
                 backward_passes_per_step: int, op: OpArg | ops._AdasumOp, gradient_predivide_factor: float,
                 groups: Groups, sparse_as_dense: bool, process_set: ProcessSet | None) -> None:
        # the wrapped optimizer's own __init__ (self.__class__ derives from it): the param groups carry
        # its hyper-parameters
        super(self.__class__, self).__init__(params)  # type: ignore[call-arg]
        self.sparse_as_dense = bool(sparse_as_dense)
        self._compression = compression
        self.op = ops.resolve_op(op)
        if gradient_predivide_factor != 1.0 and self.op != ops.Average:
            raise ValueError("gradient_predivide_factor only applies to op=Average")
        if int(backward_passes_per_step) < 1:
            raise ValueError("backward_passes_per_step must be at least 1")
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.gradient_predivide_factor = float(gradient_predivide_factor)
        self.process_set = process_set
        self._included = process_set is None or process_set.included()
        self._parameter_names = self._name_parameters(named_parameters)
        self._requires_update = [p for g in self.param_groups for p in g["params"]
                                 if p.requires_grad]
        self._delay = {p: self.backward_passes_per_step for p in self._requires_update}
        self._group_of = self._make_groups(groups)      # param -> tuple of its group's params
        self._group_ready: dict[tuple[torch.Tensor, ...], set[torch.Tensor]] = {}  # group -> params ready
        self._handles: dict[torch.Tensor, _Pending] = {}
        self._hook_handles: list[Any] = []
        self._backward: Any = None   # the open BACKWARD span of the running backward pass
        self._synchronized = False
        self._should_synchronize = True
        self._register_hooks()

    # ---- naming ------------------------------------------------------------------------------
    def _name_parameters(self, named_parameters: Iterable[tuple[str, torch.Tensor]] | None
                         ) -> dict[torch.Tensor, str]:
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

    def _make_groups(self, groups: Groups) -> dict[torch.Tensor, tuple[torch.Tensor, ...]]:
        """Horovod's ``groups``: an int (split the parameters into that many groups) or a list of
        parameter lists; each group is reduced as one fused grouped allreduce."""
        if not groups:
            return {}
        params = self._requires_update
        if isinstance(groups, int):
            k = max(1, min(groups, len(params)))
            size = -(-len(params) // k)
            lists = [params[i:i + size] for i in range(0, len(params), size)]
        else:
            lists = [[p for p in g if p.requires_grad] for g in groups]
            seen = [p for g in lists for p in g]
            if len(set(seen)) != len(seen) or any(p not in self._delay for p in seen):
                raise ValueError("groups must be disjoint lists of the optimizer's parameters")
        return {p: tuple(g) for g in lists if len(g) > 1 for p in g}

    # ---- hooks -------------------------------------------------------------------------------
    def _register_hooks(self) -> None:
        if not self._included:   # outside the set: nothing to reduce, a local optimizer
            return
        for p in self._requires_update:
            self._hook_handles.append(p.register_post_accumulate_grad_hook(self._on_grad_ready))

    def _open_backward(self) -> None:
        """At a pass's first gradient: open BACKWARD, and have autograd close it when the pass ends
        (all its hooks, so all its submissions, done)."""
        self._backward = open_span(vocab.BACKWARD, vocab.CAT_PHASE, vocab.TID_FRAMEWORK)
        if self._backward is not None:
            torch.autograd.Variable._execution_engine.queue_callback(self._close_backward)

    def _close_backward(self) -> None:
        opened, self._backward = self._backward, None
        close_span(opened)

    def _on_grad_ready(self, p: torch.Tensor) -> None:
        if self._backward is None:
            self._open_backward()
        delay = self._delay[p] - 1   # (a parameter's hash is a Python call: looked up once each)
        if delay < 0:
            raise AssertionError(
                "gradients were computed more than backward_passes_per_step times before step(); "
                "raise backward_passes_per_step to accumulate gradients locally")
        self._delay[p] = delay
        group = self._group_of.get(p) if self._group_of else None
        if delay != 0:
            self._handles[p] = (None, None)
        elif group is None:
            self._handles[p] = self._allreduce_grad_async(p)
        else:
            self._handles[p] = (None, None)
            ready = self._group_ready.setdefault(group, set())
            ready.add(p)
            if len(ready) == len(group):
                self._allreduce_group_async(group)

    def _scales(self) -> tuple[float, float]:
        if self.op == ops.Average:
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _dense_grad(self, p: torch.Tensor) -> torch.Tensor:
        """The dense tensor to reduce for ``p`` (a sparse gradient goes densified only with
        ``sparse_as_dense``; the result is written back sparse)."""
        grad = p.grad
        if grad is None:
            # another rank may have a gradient for it this step: take part with zeros
            grad = p.grad = torch.zeros_like(p)
        return grad.to_dense() if grad.is_sparse else grad

    def _allreduce_group_async(self, group: tuple[torch.Tensor, ...]) -> None:
        pairs = [self._compression.compress(self._dense_grad(p)) for p in group]
        pre, post = self._scales()
        handle = ops._grouped_async([c for c, _ in pairs], [c for c, _ in pairs],
                                    f"group.{self._parameter_names[group[0]]}", self.op, pre, post,
                                    self.process_set,
                                    names=[self._parameter_names[p] for p in group])
        for i, (p, (_, ctx)) in enumerate(zip(group, pairs)):
            self._handles[p] = ((handle, i), ctx)
        self._group_ready.pop(group, None)

    def _allreduce_grad_async(self, p: torch.Tensor) -> tuple[ops.Handle[torch.Tensor], torch.dtype | None]:
        if p.grad is not None and p.grad.is_sparse and not self.sparse_as_dense:
            return ops.sparse_allreduce_async(p.grad, self._parameter_names[p], self.op,
                                              self.process_set), None
        compressed, ctx = self._compression.compress(self._dense_grad(p))
        pre, post = self._scales()
        handle = ops.allreduce_async_(compressed, name=self._parameter_names[p], op=self.op,
                                      prescale_factor=pre, postscale_factor=post,
                                      process_set=self.process_set)
        return handle, ctx

    # ---- the Horovod API ---------------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait for every gradient's allreduce (starting any that have not started) and write
        the averaged gradients into ``p.grad``. (Each wait is a SYNCHRONIZE span in the trace.)"""
        if not self._included:
            self._synchronized = True
            return
        try:
            for p in self._requires_update:
                if p not in self._handles or self._handles[p][0] is None:
                    group = self._group_of.get(p)
                    if group is None:
                        self._handles[p] = self._allreduce_grad_async(p)
                    else:
                        self._allreduce_group_async(group)
            for p, (handle, ctx) in self._handles.items():
                if isinstance(handle, tuple):
                    output = ops.synchronize(handle[0])[handle[1]]
                else:
                    assert handle is not None   # the loop above started every missing one
                    output = ops.synchronize(handle)
                self._write_grad(p, output, ctx)
        finally:
            self._handles.clear()
            self._group_ready.clear()
            for p in self._requires_update:
                self._delay[p] = self.backward_passes_per_step
        self._synchronized = True

    def _write_grad(self, p: torch.Tensor, output: torch.Tensor, ctx: torch.dtype | None) -> None:
        grad = p.grad
        assert grad is not None   # _dense_grad gave every reduced parameter one
        if output is grad:   # reduced in place (the common case)
            return
        with torch.no_grad():
            if grad.is_sparse:   # sparse_allreduce's result, or a densified one made sparse
                out = output if output.is_sparse else \
                    self._compression.decompress(output, ctx).to_sparse()
                grad.zero_()
                grad.add_(out)
            elif output.data_ptr() != grad.data_ptr():
                grad.copy_(self._compression.decompress(output, ctx))

    def _local_step(self, closure: Callable[[], float] | None = None) -> float | None:
        """The wrapped optimizer's own step: no synchronization."""
        return super(self.__class__, self).step(closure)

    @contextlib.contextmanager
    def skip_synchronize(self) -> Iterator[None]:
        """Inside this block ``step()`` does not synchronize (call ``synchronize()`` yourself)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    @overload
    def step(self, closure: None = None) -> None: ...
    @overload
    def step(self, closure: Callable[[], float]) -> float: ...
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        self._close_backward()   # left open only by a backward pass that raised
        opened = open_span(vocab.OPTIMIZER_STEP, vocab.CAT_PHASE, vocab.TID_FRAMEWORK)
        try:
            result = self._synchronize_and_step(closure)
        finally:
            close_span(opened)
        tracer.mark_step()
        return result

    def _synchronize_and_step(self, closure: Callable[[], float] | None) -> float | None:
        if self._should_synchronize:
            if self._synchronized:
                # reducing already-reduced gradients again would be wasted (or, for op=Sum, wrong);
                # the first sentence is Horovod's, which users and tests match on
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). The gradients are used as "
                              "they are, already reduced; call step() inside "
                              "optimizer.skip_synchronize() after synchronize() to avoid this "
                              "warning.", stacklevel=4)   # past step() and torch's step() hook wrapper
            else:
                self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none: bool = True) -> None:
        if any(h is not None for h, _ in self._handles.values()):
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                                 "optimizer.step() or optimizer.synchronize(); that would race "
                                 "with the gradients' allreduce")
        return super(self.__class__, self).zero_grad(set_to_none=set_to_none)


def DistributedOptimizer(optimizer: OptimizerT, named_parameters: Iterable[tuple[str, torch.Tensor]] | None = None,
                         compression: type[Compressor] = Compression.none, backward_passes_per_step: int = 1,
                         op: OpArg | ops._AdasumOp = ops.Average, gradient_predivide_factor: float = 1.0,
                         num_groups: int = 0, groups: Groups = None, sparse_as_dense: bool = False,
                         process_set: ProcessSet | None = None) -> OptimizerT:
    """Wrap a ``torch.optim`` optimizer so that gradients are averaged across ranks.

    The result is an instance of the optimizer's own class (``isinstance`` still holds) carrying
    the wrapped optimizer's param groups and state. Each gradient is an allreduce named
    ``allreduce.<parameter name>``, started by a hook as soon as the gradient is ready; with
    ``groups`` (an int, or lists of parameters; ``num_groups`` is its old spelling) each group goes
    as one grouped allreduce once all of its gradients are ready.
    """
    if op is ops.Adasum:
        ops.resolve_op(op)
    if num_groups and groups:
        raise ValueError("set groups or the deprecated num_groups, not both")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    dist = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, groups or num_groups, sparse_as_dense, process_set)
    dist.state.update(optimizer.state)
    return dist
