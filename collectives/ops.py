"""Reduction operations and their numpy/MPI counterparts.

``Average`` is a sum followed by a division by the process-set size. For integer dtypes the division
truncates toward zero (C semantics, like ``torch.div(..., rounding_mode="trunc")``); scale factors on
integer tensors multiply in float64 and truncate toward zero as well.
"""
from __future__ import annotations

import enum

# numpy and mpi4py.MPI are imported where they are used: numpy stays out of `import collectives`,
# and importing mpi4py.MPI starts MPI, which collectives.init does first


class ReduceOp(enum.Enum):
    Average = "Average"
    Sum = "Sum"
    Min = "Min"
    Max = "Max"
    Product = "Product"

    def __repr__(self):
        return self.value

    __str__ = __repr__


Average = ReduceOp.Average
Sum = ReduceOp.Sum
Min = ReduceOp.Min
Max = ReduceOp.Max
Product = ReduceOp.Product


def as_op(op) -> ReduceOp:
    """Accept a ReduceOp or its name (case-insensitive)."""
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, str):
        for member in ReduceOp:
            if member.value.lower() == op.lower():
                return member
    raise ValueError(f"unknown reduce op {op!r}; use one of Sum, Average, Min, Max, Product")


def backend_op(op: ReduceOp) -> ReduceOp:
    """The op a backend runs: Average becomes Sum (the engine divides afterwards)."""
    return ReduceOp.Sum if op is ReduceOp.Average else op


def numpy_ufunc(op: ReduceOp):
    import numpy as np
    return {ReduceOp.Sum: np.add, ReduceOp.Average: np.add, ReduceOp.Min: np.minimum,
            ReduceOp.Max: np.maximum, ReduceOp.Product: np.multiply}[op]


def mpi_op(op: ReduceOp):
    from mpi4py import MPI
    return {ReduceOp.Sum: MPI.SUM, ReduceOp.Average: MPI.SUM, ReduceOp.Min: MPI.MIN,
            ReduceOp.Max: MPI.MAX, ReduceOp.Product: MPI.PROD}[op]
