"""aescl/_arrays.py: host buffers in and out of the cipher objects; here the results a
plain call returns as bytes, written in place (BytesResult)."""

from __future__ import annotations

import gc

import pytest

from aescl._arrays import _MAPPED_BYTES, BytesResult


@pytest.mark.parametrize("length", [0, 5, _MAPPED_BYTES - 1, _MAPPED_BYTES, 3 * _MAPPED_BYTES + 7])
def test_a_result_written_in_place_is_an_ordinary_bytes_object(length):
    result = BytesResult(length)
    pattern = bytes(range(256)) * (length // 256 + 1)
    result.view[:] = pattern[:length]
    done = result.done()
    assert type(done) is bytes and done == pattern[:length] and len(done) == length
    # Hashed, compared and kept like any bytes: its hash is its contents'.
    assert hash(done) == hash(bytes(pattern[:length]))
    assert {done: 1}[pattern[:length]] == 1
    with pytest.raises(ValueError):  # (the writable view is gone with done)
        result.view[:1] = b"x"


def test_a_result_outlives_its_writer_and_many_are_made_and_dropped():
    kept = []
    for n in range(20):
        result = BytesResult(_MAPPED_BYTES + n)
        result.view[:] = bytes([n]) * (_MAPPED_BYTES + n)
        kept.append(result.done())
        del result
        gc.collect()
    assert all(k == bytes([n]) * (_MAPPED_BYTES + n) for n, k in enumerate(kept))


def test_a_view_held_past_done_keeps_the_result_alive():
    """An engine that kept a NumPy view of the memory (a pipeline slot, say) neither
    makes done() fail nor is left pointing at freed memory once the caller drops the
    result."""
    import numpy as np

    result = BytesResult(_MAPPED_BYTES)
    held = np.frombuffer(result.view, np.uint8)
    held[:] = 7
    done = result.done()
    del done, result
    gc.collect()
    assert int(held.sum()) == 7 * _MAPPED_BYTES  # (the memory is still the result's)
