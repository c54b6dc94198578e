"""The bit rounds' words in the native core (collectives/core/bit_words.c)."""
import numpy as np
import pytest

from collectives._core import bits_of, put_bits


def test_bits_go_in_and_come_back_in_order():
    w = np.zeros(5, dtype=np.uint64)
    bits = {0, 1, 63, 64, 127, 128, 190}
    put_bits(w, 2, bits, True)
    assert w[:2].tolist() == [0, 0]
    assert w[2] == np.uint64((1 << 0) | (1 << 1) | (1 << 63))
    assert bits_of(w, 2, 3, False) == sorted(bits)
    put_bits(w, 2, {63, 128}, False)
    assert bits_of(w, 2, 3, False) == [0, 1, 64, 127, 190]


def test_inverted_gives_the_clear_bits():
    w = np.full(2, 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
    put_bits(w, 0, [5, 70], False)
    assert bits_of(w, 0, 2, True) == [5, 70]
    assert bits_of(w, 1, 1, True) == [6]


def test_out_of_range_is_refused():
    w = np.zeros(2, dtype=np.uint64)
    with pytest.raises(IndexError):
        put_bits(w, 1, [64], True)
    with pytest.raises(IndexError):
        bits_of(w, 1, 2, False)
    with pytest.raises(TypeError):
        bits_of(np.zeros(4, dtype=np.uint8), 0, 1, False)
