"""``SyncBatchNorm``: batch normalization with statistics over every rank's batch (Horovod's
``hvd.SyncBatchNorm``). Training mode reduces per-channel sums across ranks in the forward pass and
the gradient sums in the backward pass; evaluation mode uses the running statistics, with no
communication. The weight and bias gradients stay local, for the DistributedOptimizer to average.
"""
from __future__ import annotations

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from collectives.torch import mpi_ops as ops


def _sum_across(t: torch.Tensor, process_set) -> torch.Tensor:
    return ops.synchronize(ops._allreduce_async(t, None, None, ops.Sum, 1.0, 1.0, process_set))


class _SyncBatchNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, process_set):
        c = x.shape[1]
        dims = [d for d in range(x.dim()) if d != 1]
        xd = x.double()
        local = torch.cat([xd.sum(dims), (xd * xd).sum(dims),
                           torch.tensor([x.numel() // c], dtype=torch.float64)])
        total = _sum_across(local, process_set)
        count = total[-1].item()
        if count <= 1:
            raise ValueError(f"SyncBatchNorm needs more than one value per channel, got {count:g}")
        mean = total[:c] / count
        var = (total[c:2 * c] / count - mean * mean).clamp_min(0)
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None:
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
                unbiased = var * count / (count - 1)
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype),
                                                    alpha=momentum)
        shape = [1, c] + [1] * (x.dim() - 2)
        xhat = ((xd - mean.view(shape)) * invstd.view(shape)).to(x.dtype)
        ctx.save_for_backward(xhat, weight, invstd)
        ctx.count, ctx.process_set, ctx.dims, ctx.shape = count, process_set, dims, shape
        out = xhat
        if weight is not None:
            out = out * weight.view(shape) + bias.view(shape)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        xhat, weight, invstd = ctx.saved_tensors
        dims, shape, c = ctx.dims, ctx.shape, xhat.shape[1]
        g = grad_out.double()
        local = torch.cat([g.sum(dims), (g * xhat.double()).sum(dims)])
        grad_w = local[c:].to(xhat.dtype) if weight is not None else None
        grad_b = local[:c].to(xhat.dtype) if weight is not None else None
        total = _sum_across(local, ctx.process_set)
        mean_g, mean_gx = total[:c] / ctx.count, total[c:] / ctx.count
        scale = invstd * (weight.double() if weight is not None else 1.0)
        grad_x = (g - mean_g.view(shape) - xhat.double() * mean_gx.view(shape)) * scale.view(shape)
        return grad_x.to(xhat.dtype), grad_w, grad_b, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Drop-in for ``torch.nn.BatchNorm1d/2d/3d`` that normalizes over every rank's batch."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        if not self.training and self.track_running_stats:
            return torch.nn.functional.batch_norm(input, self.running_mean, self.running_var,
                                                  self.weight, self.bias, False, 0.0, self.eps)
        momentum = self.momentum if self.momentum is not None else 0.1
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                momentum = 1.0 / float(self.num_batches_tracked)
        return _SyncBatchNormFn.apply(input, self.weight, self.bias,
                                      self.running_mean if self.training else None,
                                      self.running_var if self.training else None,
                                      self.eps, momentum, self.process_set)
