"""The synchronous, autograd-aware collectives: ``allreduce``, ``grouped_allreduce``, ``allgather``,
``grouped_allgather``, ``broadcast``, ``alltoall``, ``reducescatter`` and ``grouped_reducescatter``.

The backward passes are Horovod's: the gradient of an allreduce is the same allreduce of the
gradient; of an allgather, this rank's slice of the *averaged* gradient; of a broadcast, the averaged
gradient on the root and zeros elsewhere; of a reducescatter, the allgathered gradient, times the set
size for Sum (Average is left unscaled) and times the scale factors.
"""
from __future__ import annotations

import torch

from collectives.torch import mpi_ops as ops
from collectives.torch.compression import Compression


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set, priority):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return ops.synchronize(ops._allreduce_async(tensor, None, name, op, prescale_factor,
                                                    postscale_factor, process_set, priority))

    @staticmethod
    def backward(ctx, grad_output):
        op, pre, post, pset = ctx.args
        grad = ops.synchronize(ops._allreduce_async(grad_output.contiguous(), None, None, op, pre,
                                                    post, pset))
        return grad, None, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=None, priority=0):
    """Reduce ``tensor`` across ranks (Average by default) and return a new tensor.

    Differentiable: its gradient is the same allreduce of the incoming gradient.
    """
    op = ops.resolve_op(op, average)
    compressed, cctx = compression.compress(tensor)
    out = _Allreduce.apply(compressed, name, op, prescale_factor, postscale_factor, process_set,
                           priority)
    return compression.decompress(out, cctx)


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, priority, *tensors):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return tuple(ops.synchronize(ops._grouped_async(tensors, None, name, op, prescale_factor,
                                                        postscale_factor, process_set,
                                                        priority=priority)))

    @staticmethod
    def backward(ctx, *grads):
        op, pre, post, pset = ctx.args
        reduced = ops.synchronize(ops._grouped_async([g.contiguous() for g in grads], None, None,
                                                     op, pre, post, pset))
        return (None, None, None, None, None, None, *reduced)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=None, priority=0):
    """Reduce a list of tensors as one negotiated, fused group; returns a list of new tensors."""
    op = ops.resolve_op(op, average)
    pairs = [compression.compress(t) for t in tensors]
    outs = _GroupedAllreduce.apply(name, op, prescale_factor, postscale_factor, process_set,
                                   priority, *[p[0] for p in pairs])
    return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]


def _averaged(grads, process_set) -> list:
    """The gradients averaged over the set, as one grouped allreduce."""
    return ops.synchronize(ops._grouped_async([g.contiguous() for g in grads], None, None,
                                              ops.Average, prescale_factor=1.0,
                                              postscale_factor=1.0, process_set=process_set))


def _first_dims(dim0: int, process_set) -> list[int]:
    got = ops.synchronize(ops.allgather_async(torch.tensor([dim0], dtype=torch.int64),
                                              process_set=process_set))
    return [int(d) for d in got.tolist()]


def _set_rank(process_set) -> int:
    return ops.pset(process_set).rank()


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim0, ctx.process_set = tensor.shape[0], process_set
        return ops.synchronize(ops.allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        averaged = _averaged([grad_output], ctx.process_set)[0]
        dims = _first_dims(ctx.dim0, ctx.process_set)
        offset = sum(dims[:_set_rank(ctx.process_set)])
        return averaged.narrow(0, offset, ctx.dim0), None, None


def allgather(tensor, name=None, process_set=None):
    """Concatenate every rank's ``tensor`` along dim 0 (first dims may differ). Differentiable."""
    if tensor.dim() == 0:
        raise ValueError("allgather needs a tensor with at least one dimension")
    return _Allgather.apply(tensor, name, process_set)


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return ops.synchronize(ops.broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        averaged = _averaged([grad_output], ctx.process_set)[0]
        if not ops.is_root(ctx.root_rank, ctx.process_set):
            averaged = torch.zeros_like(averaged)
        return averaged, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=None):
    """Return ``root_rank``'s ``tensor`` (a global rank) on every rank of the set (input
    unchanged). Differentiable."""
    return _Broadcast.apply(tensor, root_rank, name, process_set)


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        out, received = ops.synchronize(ops.alltoall_async(tensor, splits, name, process_set))
        ctx.received, ctx.process_set = received, process_set
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad_output, _unused):
        grad, _ = ops.synchronize(ops.alltoall_async(grad_output.contiguous(), ctx.received, None,
                                                     ctx.process_set))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=None):
    """Send dim-0 slices (``splits`` rows to each rank, equal by default) to every rank.

    Returns the gathered tensor, or ``(output, received_splits)`` when ``splits`` is given.
    Differentiable.
    """
    out, received = _Alltoall.apply(tensor, splits, name, process_set)
    return out if splits is None else (out, received)


def _reducescatter_grad_scale(op, process_set, prescale_factor, postscale_factor) -> float:
    scale = prescale_factor * postscale_factor
    return scale * ops.pset(process_set).size() if op == ops.Sum else scale


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.process_set = process_set
        ctx.scale = _reducescatter_grad_scale(op, process_set, prescale_factor, postscale_factor)
        return ops.synchronize(ops.reducescatter_async(tensor, name, op, process_set,
                                                       prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad = ops.synchronize(ops.allgather_async((grad_output * ctx.scale).contiguous(), None,
                                                   ctx.process_set))
        return grad, None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=None, process_set=None,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Reduce ``tensor`` across ranks and return this rank's dim-0 slice. Differentiable."""
    op = ops.resolve_op(op)
    if op not in (ops.Average, ops.Sum):
        raise ValueError("reducescatter supports op=Average or op=Sum")
    compressed, cctx = compression.compress(tensor)
    out = _Reducescatter.apply(compressed, name, op, process_set, prescale_factor,
                               postscale_factor)
    return compression.decompress(out, cctx)


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims, ctx.process_set = [t.shape[0] for t in tensors], process_set
        return tuple(ops.synchronize(ops.grouped_allgather_async(tensors, name, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        averaged = _averaged(grads, ctx.process_set)
        dims = ops.synchronize(ops.grouped_allgather_async(
            [torch.tensor([d], dtype=torch.int64) for d in ctx.dims], process_set=ctx.process_set))
        r = _set_rank(ctx.process_set)
        return (None, None, *[g.narrow(0, int(d[:r].sum()), n)
                              for g, d, n in zip(averaged, dims, ctx.dims)])


def grouped_allgather(tensors, name=None, process_set=None):
    """Allgather each tensor of a list (submitted together); returns a list. Differentiable."""
    tensors = list(tensors)
    if any(t.dim() == 0 for t in tensors):
        raise ValueError("grouped_allgather needs tensors with at least one dimension")
    return list(_GroupedAllgather.apply(name, process_set, *tensors))


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.process_set = process_set
        ctx.scale = _reducescatter_grad_scale(op, process_set, prescale_factor, postscale_factor)
        return tuple(ops.synchronize(ops.grouped_reducescatter_async(
            tensors, name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grads):
        gathered = ops.synchronize(ops.grouped_allgather_async(
            [(g * ctx.scale).contiguous() for g in grads], process_set=ctx.process_set))
        return (None, None, None, None, None, *gathered)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=None,
                          process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatter each tensor of a list (submitted together); returns a list of this rank's
    slices. Differentiable."""
    op = ops.resolve_op(op)
    if op not in (ops.Average, ops.Sum):
        raise ValueError("grouped_reducescatter supports op=Average or op=Sum")
    pairs = [compression.compress(t) for t in tensors]
    outs = _GroupedReducescatter.apply(name, op, process_set, prescale_factor, postscale_factor,
                                       *[c for c, _ in pairs])
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]
