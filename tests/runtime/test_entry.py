"""Entry's constructor (collectives/core/entry.c, a vectorcall): positions, keywords, defaults and
the errors of a bad call."""
from __future__ import annotations

import pytest

from collectives.entry import Entry
from collectives.ops import ReduceOp


def test_positions_keywords_and_defaults():
    e = Entry("a", "ALLREDUCE", "t", "ad", ReduceOp.Average, 2.0, priority=3, output="o")
    assert (e.name, e.op_type, e.tensor, e.adapter) == ("a", "ALLREDUCE", "t", "ad")
    assert (e.reduce_op, e.prescale, e.postscale, e.root) == (ReduceOp.Average, 2.0, 1.0, -1)
    assert (e.priority, e.output, e.process_set, e.splits, e.backend) == (3, "o", 0, None, None)
    assert (e.group, e.handle, e.stamp, e.trace_key) == (None, None, None, None)
    assert (e.dtype, e.shape, e.device, e.nbytes, e.meta) == ("", (), "cpu", 0, {})


def test_keywords_that_are_not_interned():
    kw = {"".join(["pro", "cess_set"]): 4, "root": 1}   # built at run time: matched by value
    e = Entry(name="n", op_type="o", tensor=1, adapter=2, **kw)
    assert (e.process_set, e.root, e.reduce_op) == (4, 1, ReduceOp.Sum)


@pytest.mark.parametrize("args, kw, msg", [
    (("a",), {}, "missing required argument 'op_type'"),
    (("a", "b", "c", "d"), {"colour": 1}, "unexpected keyword argument 'colour'"),
    (("a", "b", "c", "d"), {"name": 1}, "multiple values for argument 'name'"),
    (tuple(range(14)), {}, "at most 13 arguments"),
])
def test_bad_calls(args, kw, msg):
    with pytest.raises(TypeError, match=msg):
        Entry(*args, **kw)
