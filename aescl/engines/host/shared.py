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


_regions: dict[int, Region] = {}
_lock = threading.Lock()
_tokens = iter(range(1, 1 << 62))


# Told each freed region's token: the host engine's idle worker processes then drop
# their mappings of it, which would otherwise hold its memory until their next task.
_when_freed: list[Callable[[int], None]] = []


def when_freed(tell: Callable[[int], None]) -> None:
    """Have ``tell(token)`` called once each region is freed."""
    _when_freed.append(tell)


def _free(token: int) -> None:
    with _lock:
        region = _regions.pop(token, None)
    if region is not None:
        os.close(region.fd)
        for tell in _when_freed:
            tell(token)


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
    with _lock:
        for region in _regions.values():
            if region.start <= address and address + view.nbytes <= region.start + region.size:
                return region, address - region.start
    return None


def is_live(token: int) -> bool:
    """Whether the region ``token`` is still allocated (a worker may unmap it if not)."""
    return token in _regions
