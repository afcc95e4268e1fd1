"""Host memory that the host engine's worker processes map too (Linux memfd).

The host engine's threads share one interpreter with a GPU's feeding thread; beside
it they lose most of their speed (docs/benchmarks: a 1 GiB CTR job split at a fixed
ratio between the H200 and 15 OpenSSL threads did 35-45 GB/s, the GPU alone 44; the
same split with 15 worker processes did 54-57). Worker processes can only work in
memory they can map, so aescl allocates such memory itself: ``aescl.pinned_empty``
for the host engine or a team with it.

Each region is a memfd mapped shared. Its descriptor stays open while the region
lives, so that a worker can be handed it (processes.py); a worker maps a
region once and keeps it until told the region was freed.
"""

from __future__ import annotations

import collections
import mmap
import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

AVAILABLE = hasattr(os, "memfd_create")


@dataclass(frozen=True)
class Region:
    token: int  # unique for this process's life: how workers name their mappings
    fd: int
    start: int  # address in this process
    size: int
    # Pinned for a device's DMA too: a thread of this process feeds that device
    # during jobs on it, and needs a core of its own (engine.py).
    beside_device: bool = False


# Where a job's array is not in a region: the caller's ordinary memory, which worker
# processes read and write through reach.py.
ORDINARY = Region(0, -1, 0, 0)

_regions: dict[int, Region] = {}
_lock = threading.Lock()
_tokens = iter(range(1, 1 << 62))
# Tokens of regions whose memory was collected, not yet let go of (_free).
_collected: collections.deque[int] = collections.deque()


# Told each freed region's token: the host engine's idle worker processes then drop
# their mappings of it, which would otherwise hold its memory until their next task.
_when_freed: list[Callable[[int], None]] = []


def when_freed(tell: Callable[[int], None]) -> None:
    """Have ``tell(token)`` called once each region is freed."""
    _when_freed.append(tell)


def _free(token: int) -> None:
    """A region's memory was collected. This runs wherever the garbage collector does:
    also inside this module's own locked steps, on the thread that holds ``_lock``, when
    an allocation there set the collector off; waiting for the lock there never ended
    (a CI run hung, 2026-11-26). So the token is queued, and let go of now only where the
    lock is free; else by the holder, as it leaves its step."""
    _collected.append(token)
    _let_go_of_collected()


def _let_go_of_collected() -> None:
    """The regions of the queued tokens closed and their workers told, unless another
    step holds the lock (it calls this again when it is done)."""
    while _collected:
        if not _lock.acquire(blocking=False):
            return
        regions = []
        try:
            while _collected:
                regions.append(_regions.pop(_collected.popleft(), None))
        finally:
            _lock.release()
        for region in regions:
            if region is not None:
                os.close(region.fd)
                for tell in _when_freed:
                    tell(region.token)


def shared_empty(nbytes: int, beside_device: bool = False) -> mmap.mmap:
    """A new region of ``nbytes`` (zero-filled) that worker processes can map;
    ``beside_device``: the caller pins it for a device's DMA as well."""
    size = max(1, nbytes)
    fd = os.memfd_create("aescl", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
        memory = mmap.mmap(fd, size, flags=mmap.MAP_SHARED)
    except BaseException:
        os.close(fd)
        raise
    with _lock:
        region = Region(next(_tokens), fd, _address(memoryview(memory)) or 0, size,
                        beside_device)
        _regions[region.token] = region
    _let_go_of_collected()  # (any collected while the lock was held here)
    weakref.finalize(memory, _free, region.token)
    return memory


def _address(view: memoryview) -> int | None:
    """The address of a writable buffer's first byte; None for a read-only or empty one."""
    import ctypes  # (here: a small job's start-up never needs it)

    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(view))
    except (TypeError, ValueError):
        return None


def locate(data: Any) -> tuple[Region, int] | None:
    """(region, offset) of ``data`` when all of it lies in one shared region, else None."""
    if not _regions:
        return None
    view = memoryview(data)
    address = _address(view)
    if address is None:
        return None
    found = None
    with _lock:
        for region in _regions.values():
            if region.start <= address and address + view.nbytes <= region.start + region.size:
                found = region, address - region.start
                break
    _let_go_of_collected()
    return found


def is_live(token: int) -> bool:
    """Whether the region ``token`` is still allocated (a worker may unmap it if not)."""
    return token in _regions


# ---- Regions handed to worker processes (processes.py, engines/gpu_processes.py) ------


def hand_over(connection: Any, pid: int, mapped: set[int], regions: Any) -> None:
    """Tell a worker (process ``pid``, at the other end of ``connection``) which of the
    regions it maps (``mapped``, their tokens; kept up to date here) were freed, then
    hand it each of ``regions`` it does not map yet: ``("map", token, size)`` and the
    region's descriptor."""
    from multiprocessing.reduction import send_handle

    gone = [token for token in mapped if not is_live(token)]
    if gone:
        connection.send(("unmap", gone))
        mapped.difference_update(gone)
    for region in regions:
        if region.token not in mapped:
            connection.send(("map", region.token, region.size))
            send_handle(connection, region.fd, pid)
            mapped.add(region.token)


def mapping_handed(connection: Any, size: int) -> mmap.mmap:
    """In a worker: the region whose descriptor :func:`hand_over` sends next, mapped.
    Populated now: page faults on every first touch would cost more than the work (a
    1 GiB split on the host engine ran at half speed without it)."""
    from multiprocessing.reduction import recv_handle

    descriptor = recv_handle(connection)
    try:
        return mmap.mmap(descriptor, size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
    finally:
        os.close(descriptor)
