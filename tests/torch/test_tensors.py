"""CPU tensors reach the numpy engine as views of their own memory (no copies where torch allows)."""
import numpy as np
import torch

from collectives.torch import tensors as T


def test_contiguous_cpu_tensor_is_a_view():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    a = T.to_numpy(t)
    assert T.shares_memory(t, a)
    a[0, 0] = 42.0
    assert t[0, 0].item() == 42.0


def test_parameters_with_grad_are_viewed_without_copy():
    p = torch.nn.Parameter(torch.ones(5))
    assert T.shares_memory(p, T.to_numpy(p))


def test_what_numpy_cannot_hold_is_copied():
    bf = torch.ones(4, dtype=torch.bfloat16)
    a = T.to_numpy(bf)
    assert a.dtype == np.float32 and not T.shares_memory(bf, a)
    strided = torch.zeros(4, 6)[:, ::2]
    assert not T.shares_memory(strided, T.to_numpy(strided))


def test_results_come_back_without_copy_and_in_place_writes_skip_self_copies():
    a = np.arange(6, dtype=np.float64)
    like = torch.zeros(6, dtype=torch.float64)
    out = T.from_engine(a, like=like)
    assert out.data_ptr() == a.__array_interface__["data"][0]
    t = torch.zeros(3)
    view = T.to_numpy(t)
    view[:] = 7
    assert T.copy_into(t, view) is t and t.tolist() == [7, 7, 7]
    T.copy_into(t, np.array([1, 2, 3], dtype=np.float32))
    assert t.tolist() == [1, 2, 3]


def test_results_cast_back_to_the_callers_dtype():
    bf = torch.ones(2, dtype=torch.bfloat16)
    out = T.from_engine(np.array([1.5, 2.5], dtype=np.float32), like=bf)
    assert out.dtype == torch.bfloat16 and out.tolist() == [1.5, 2.5]
