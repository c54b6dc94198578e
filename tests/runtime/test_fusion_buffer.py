"""The packing plan of a fused response on the host (collectives/core/fusion_buffer.c)."""
import numpy as np
import pytest

from collectives._core import pack, unpack


def test_pack_and_unpack_at_their_offsets():
    a, b = np.arange(3, dtype=np.float32), np.arange(4, dtype=np.float32).reshape(2, 2) + 10
    buf = np.empty(7, dtype=np.float32)
    assert pack(buf, [a, b])
    assert buf.tolist() == [0, 1, 2, 10, 11, 12, 13]
    buf *= 2
    out_a, out_b = np.zeros(3, np.float32), np.zeros((2, 2), np.float32)
    assert unpack(buf, [out_a, out_b])
    assert out_a.tolist() == [0, 2, 4] and out_b.tolist() == [[20, 22], [24, 26]]


def test_what_it_cannot_copy_is_left_untouched():
    buf = np.full(4, -1.0)
    strided = np.arange(8.0)[::2]
    assert not pack(buf, [strided])          # not contiguous: the numpy path's
    assert buf.tolist() == [-1.0] * 4
    frozen = np.zeros(4)
    frozen.flags.writeable = False
    assert not unpack(np.ones(4), [frozen])  # not writable
    assert not unpack(np.ones(4), [None])    # no output given
    assert frozen.tolist() == [0.0] * 4


def test_a_size_mismatch_is_an_error():
    with pytest.raises(ValueError, match="fusion buffer holds 32 bytes"):
        pack(np.empty(4), [np.ones(3)])
