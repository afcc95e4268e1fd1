"""Reserving room in a file before writing it.

A page of a shared file mapping that the file system cannot back (the disk or a
tmpfs is full, a quota is reached) is not an error code: the write into it kills
the process with SIGBUS. So a file is written through a mapping only over room
that fallocate(2) has allocated; elsewhere it goes through write(2), which
reports ENOSPC like any other error.

fallocate is called directly rather than through ``os.posix_fallocate``: where a
file system lacks it, the C library emulates it by writing every block, which
would race with writes already under way (and be slower than they are).
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def libc() -> Any:
    """The C library through ctypes (errno kept), or None where it cannot be loaded."""
    import ctypes  # here, not at the top: 3 ms, for the runs that need it only

    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


@functools.cache
def _fallocate() -> Any:
    """fallocate(2) from the C library, or None (not Linux)."""
    import ctypes

    library = libc()
    function = library and (getattr(library, "fallocate64", None)
                            or getattr(library, "fallocate", None))
    if function is None:
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    function.restype = ctypes.c_int
    return function


def can_reserve() -> bool:
    """Whether this system has fallocate(2)."""
    return _fallocate() is not None


def reserve(fd: int, offset: int, nbytes: int) -> bool:
    """Allocate bytes ``[offset, offset + nbytes)`` of the open file ``fd`` (growing it
    if needed); True only if every byte of it is now backed by the file system.
    Data already there is never changed. The call runs without the GIL."""
    function = _fallocate()
    return function is not None and nbytes > 0 and function(fd, 0, offset, nbytes) == 0
