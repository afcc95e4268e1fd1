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


def _vm_flags_of(address: int) -> list[str] | None:
    """The VmFlags of the mapping holding ``address`` (/proc/self/smaps), or None."""
    try:
        lines = open("/proc/self/smaps").read().splitlines()
    except OSError:
        return None
    inside = False
    for line in lines:
        head = line.split()[0] if line else ""
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            start, end = (int(x, 16) for x in head.split("-"))
            inside = start <= address < end
        elif inside and line.startswith("VmFlags:"):
            return line.split()[1:]
    return None


@pytest.mark.parametrize("make", ["bytes result", "new buffer"])
def test_a_large_new_result_is_advised_into_huge_pages(make):
    """A fresh result's memory is private and asks for transparent huge pages (madvise),
    so that its first touch does not fault 4 KiB at a time; smaps shows the advice as
    ``hg``, and a shared mapping as ``sh``."""
    import mmap

    from aescl._arrays import new_buffer

    if not hasattr(mmap, "MADV_HUGEPAGE") or _vm_flags_of(id(0)) is None:
        pytest.skip("no madvise(MADV_HUGEPAGE) or /proc/self/smaps on this platform")
    import numpy as np

    length = 16 << 20
    view = BytesResult(length).view if make == "bytes result" else new_buffer(length)
    address = np.frombuffer(view, np.uint8).__array_interface__["data"][0]
    middle = address + length // 2
    flags = _vm_flags_of(middle)
    assert flags is not None and "hg" in flags, flags
    # Private memory: a shared mapping's pages fault through shmem, without huge pages.
    assert "sh" not in flags, flags
