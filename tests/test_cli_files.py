"""The CLI's output files (cli/files.py): reserved room, cut back, and nothing left on failure."""

from __future__ import annotations

import os

import pytest

from aescl import _space
from aescl.cli import files

RESERVE = files.RESERVE_MIN_BYTES


def _needs_fallocate() -> None:
    if not _space.can_reserve():
        pytest.skip("no fallocate(2) in this C library: reserving does nothing here")


def test_reserved_room_is_allocated_then_cut_back_to_what_was_written(tmp_path):
    _needs_fallocate()
    target = tmp_path / "out"
    with files.atomic_output(str(target)) as handle:
        with files.reserving(handle, RESERVE):
            pass
        status = os.fstat(handle.fileno())
        assert status.st_size == RESERVE
        assert status.st_blocks * 512 >= RESERVE  # allocated, not a sparse hole
        handle.write(b"written")
    assert target.read_bytes() == b"written"
    assert os.listdir(tmp_path) == ["out"]


def test_writes_during_the_reservation_are_kept(tmp_path):
    _needs_fallocate()
    target = tmp_path / "out"
    data = os.urandom((3 << 20) + 5)
    with files.atomic_output(str(target)) as handle:
        with files.reserving(handle, 4 * RESERVE):
            for start in range(0, len(data), 4096):
                handle.write(data[start : start + 4096])
                handle.flush()
    assert target.read_bytes() == data


def test_a_reservation_that_cannot_be_had_is_ignored(tmp_path):
    _needs_fallocate()
    target = tmp_path / "out"
    with files.atomic_output(str(target)) as handle:
        with files.reserving(handle, 1 << 62):  # more than any file system has free
            pass
        assert os.fstat(handle.fileno()).st_size == 0
        handle.write(b"still written")
    assert target.read_bytes() == b"still written"


@pytest.mark.parametrize("size", [None, RESERVE - 1])
def test_no_size_or_a_small_one_reserves_nothing(tmp_path, size):
    target = tmp_path / "out"
    with files.atomic_output(str(target)) as handle:
        with files.reserving(handle, size):
            assert os.fstat(handle.fileno()).st_size == 0
    assert target.read_bytes() == b""


def test_a_failed_job_leaves_no_reserved_file(tmp_path):
    with pytest.raises(RuntimeError), files.atomic_output(str(tmp_path / "out")) as handle:
        with files.reserving(handle, RESERVE):
            pass
        handle.write(b"partial")
        raise RuntimeError("the job failed")
    assert os.listdir(tmp_path) == []
