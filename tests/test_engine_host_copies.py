"""aescl/engines/host_copies.py: the GPU engines' staging copies, split into parts that
the host threads make at once."""

from __future__ import annotations

import threading

import numpy as np

from aescl.engines import host_copies


def test_host_copies_split_into_parts(monkeypatch):
    monkeypatch.setattr(host_copies, "PART_BYTES", 100)
    source = np.arange(1000, dtype=np.uint32).view(np.uint8)
    target = np.zeros_like(source)
    parts = host_copies.copy_parts(target, source)
    assert 1 < len(parts) <= host_copies.THREADS
    for part in parts:
        part()
    assert np.array_equal(source, target)


def test_a_copy_is_made_by_the_host_threads_at_once(monkeypatch):
    """Its parts run on the pool's threads, not the caller's, and all of it is there when
    the call returns."""
    monkeypatch.setattr(host_copies, "PART_BYTES", 1 << 10)
    monkeypatch.setattr(host_copies, "THREADS", 4)
    source = np.frombuffer(np.random.default_rng(3).bytes(1 << 20), np.uint8)
    target = np.zeros_like(source)
    threads = set()
    real = np.copyto

    def noted(*args, **kwargs):
        threads.add(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(np, "copyto", noted)
    host_copies.copy(target, source)
    assert np.array_equal(source, target)
    assert threads and all(name.startswith("aescl-host") for name in threads)


def test_a_failed_part_is_raised_once_every_part_has_ended(monkeypatch):
    """No part still writes into the target when the failure reaches the caller (who may
    free or reuse the staging then)."""
    import time

    import pytest

    monkeypatch.setattr(host_copies, "PART_BYTES", 1 << 10)
    monkeypatch.setattr(host_copies, "THREADS", 4)
    source = np.ones(1 << 12, np.uint8)
    target = np.zeros_like(source)
    ended = []
    real = np.copyto

    def slow_or_failing(into, values, *args, **kwargs):
        if into.ctypes.data == target.ctypes.data:  # (the first part)
            ended.append("failed")
            raise MemoryError("a part failed")
        time.sleep(0.2)
        real(into, values, *args, **kwargs)
        ended.append("copied")

    monkeypatch.setattr(np, "copyto", slow_or_failing)
    with pytest.raises(MemoryError, match="a part failed"):
        host_copies.copy(target, source)
    assert sorted(ended) == ["copied"] * 3 + ["failed"]
