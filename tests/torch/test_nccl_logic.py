"""The NCCL path's logic, unit-tested on CPU (no GPU and no NCCL here: nothing below claims that an
NCCL collective ran). The collectives themselves live in TorchDistBackend, which the gloo tests run
for real on 2 ranks with torch buffers through the same TorchAdapter that CUDA tensors use."""
import types

import pytest
import torch

from collectives.config import Config
from collectives.entry import Entry
from collectives.ops import ReduceOp
from collectives.process_sets import CommInfo
from collectives.torch.adapter import TORCH
from collectives.torch.backends import dist as db
from collectives.torch.backends import nccl
from collectives.torch.setup import dist_backends
from tracer import vocab as V


def test_device_pinning_follows_local_rank():
    assert nccl.nccl_device(0, 8) == "cuda:0"
    assert nccl.nccl_device(3, 8) == "cuda:3"
    assert nccl.nccl_device(9, 8) == "cuda:1"
    with pytest.raises(RuntimeError, match="CUDA device"):
        nccl.nccl_device(0, 0)


def test_reduce_op_mapping():
    import torch.distributed as dist
    assert db.torch_reduce_op(ReduceOp.Sum) == dist.ReduceOp.SUM
    assert db.torch_reduce_op(ReduceOp.Min) == dist.ReduceOp.MIN
    assert db.torch_reduce_op(ReduceOp.Max) == dist.ReduceOp.MAX
    assert db.torch_reduce_op(ReduceOp.Product) == dist.ReduceOp.PRODUCT
    with pytest.raises(ValueError, match="Sum/Min/Max/Product"):
        db.torch_reduce_op(ReduceOp.Average)     # the engine divides; a backend never averages


def test_group_spec_uses_the_set_rank_order():
    comm = CommInfo(2, [1, 3], 1, None)
    spec = db.group_spec("nccl", comm)
    assert (spec.rank, spec.size, spec.global_ranks) == (1, 2, (1, 3))
    assert spec.prefix == "ringscope/nccl/set2/1,3"
    assert db.group_spec("gloo", comm).prefix != spec.prefix
    world = db.group_spec("nccl", CommInfo(0, [0, 1, 2, 3], 2, None))
    assert (world.rank, world.size) == (2, 4)


def test_uneven_allgather_plan():
    assert db.gather_plan([3, 1, 2]) == (3, [0, 3, 4])
    assert db.gather_plan([4, 4]) == (4, [0, 4])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64,
                                   torch.int8, torch.uint8, torch.int32, torch.int64])
def test_nccl_dtypes_accepted(dtype):
    nccl.check_dtype(torch.zeros(1, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.bool, torch.int16, torch.complex64])
def test_nccl_dtypes_refused_clearly(dtype):
    with pytest.raises(TypeError, match="NCCL cannot reduce"):
        nccl.check_dtype(torch.zeros(1, dtype=dtype))


def test_activity_names_are_the_vocabulary():
    assert nccl.NcclBackend.names["allreduce"] == V.NCCL_ALLREDUCE
    for what in ("allreduce", "allgather", "broadcast", "alltoall", "reducescatter"):
        assert nccl.NcclBackend.names[what] in V.COMM_ACTIVITIES


@pytest.mark.skipif(torch.distributed.is_nccl_available(), reason="this torch has NCCL")
def test_backend_refuses_clearly_without_nccl():
    with pytest.raises(RuntimeError, match="no NCCL"):
        nccl.NcclBackend(Config())


def test_which_dist_backends_init_sets_up():
    cuda = torch.cuda.is_available() and torch.distributed.is_nccl_available()
    assert dist_backends(Config(backend="ring")) == (["nccl"] if cuda else [])
    assert dist_backends(Config(backend="gloo"))[0] == "gloo"
    assert "nccl" in dist_backends(Config(backend="nccl"))


def test_cuda_tensors_default_to_nccl_and_cpu_to_gloo():
    cuda_like = types.SimpleNamespace(device=torch.device("cuda", 0))
    assert TORCH.default_backend(cuda_like, Config()) == "nccl"
    assert TORCH.default_backend(torch.zeros(1), Config()) == "gloo"


def test_adapter_buffers_stay_on_the_tensor_device_and_share_memory():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    flat = TORCH.flat(t)
    assert flat.data_ptr() == t.data_ptr() and flat.shape == (6,)
    buf = TORCH.empty(10, "bfloat16", "cpu")
    assert buf.dtype == torch.bfloat16 and buf.device.type == "cpu"
    assert TORCH.dtype_name(t) == "float32" and TORCH.nbytes(t) == 24
    fused = TORCH.empty(8, "float32", "cpu")
    TORCH.copy_(fused, 2, t)
    assert torch.equal(TORCH.slice(fused, 2, 6), flat)


def test_adapter_scaling_and_integer_average_truncate_toward_zero():
    ints = torch.tensor([-7, 7, 5], dtype=torch.int32)
    TORCH.average_(ints, 2)
    assert ints.tolist() == [-3, 3, 2]
    ints = torch.tensor([-3, 3], dtype=torch.int64)
    TORCH.scale_(ints, 0.5)
    assert ints.tolist() == [-1, 1]
    floats = torch.ones(3, dtype=torch.float16)
    TORCH.scale_(floats, 3.0)
    TORCH.average_(floats, 4)
    assert torch.allclose(floats.float(), torch.full((3,), 0.75))


def test_adapter_result_writes_in_place_outputs():
    out = torch.zeros(2, 2)
    e = Entry("x", V.ALLREDUCE, out, TORCH, output=out)
    e.shape = (2, 2)
    res = TORCH.result(e, torch.arange(4, dtype=torch.float32))
    assert res is out and out.tolist() == [[0, 1], [2, 3]]
    e2 = Entry("y", V.ALLGATHER, torch.zeros(1, 2), TORCH)
    e2.shape, e2.meta["out_shape"] = (1, 2), (3, 2)
    assert TORCH.result(e2, torch.zeros(6)).shape == (3, 2)


def test_adapter_in_place_views_and_joined_rank_zeros():
    t = torch.ones(2, 3)
    view = TORCH.inplace_flat(t)
    assert view is not None and view.data_ptr() == t.data_ptr() and view.shape == (6,)
    assert TORCH.inplace_flat(torch.ones(4, 6)[:, ::2]) is None
    z = TORCH.zeros(5, "bfloat16", "cpu")
    assert z.dtype == torch.bfloat16 and not z.any()
    from collectives.adapters import get_adapter
    assert get_adapter("torch") is TORCH


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_adapter_packs_and_unpacks_a_fused_buffer(dtype):
    ts = [torch.arange(12).reshape(3, 4).to(dtype), torch.arange(5).to(dtype), torch.ones(2, 2, dtype=dtype)]
    buf = TORCH.empty(40, str(dtype).replace("torch.", ""))[:21]   # a slice of a larger fusion buffer
    TORCH.pack(buf, ts)
    assert torch.equal(buf, torch.cat([t.reshape(-1) for t in ts]))
    buf.mul_(3)
    for outs in ([torch.zeros_like(t) for t in ts], [torch.zeros_like(ts[0]), None, torch.zeros_like(ts[2])],
                 [None, None, None]):
        res = TORCH.unpack(buf, [12, 5, 4], outs)
        for r, o, t in zip(res, outs, ts):
            assert o is None or r is o, "an in-place output is the result itself"
            assert torch.equal(r.reshape(-1), 3 * t.reshape(-1))
        kept = buf.clone()
        buf.zero_()   # the fusion buffer is reused by the next response: no result may alias it
        assert all(torch.equal(r.reshape(-1), 3 * t.reshape(-1)) for r, t in zip(res, ts))
        buf.copy_(kept)


def test_adapter_packs_tensors_that_require_grad():
    w = torch.ones(4, requires_grad=True)
    buf = torch.empty(4)
    TORCH.pack(buf, [w])
    assert torch.equal(buf, torch.ones(4)) and not buf.requires_grad
