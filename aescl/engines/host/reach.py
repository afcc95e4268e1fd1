"""The caller's ordinary memory, read and written by the host engine's worker processes
(Linux ``process_vm_readv``/``process_vm_writev``).

A worker can map only memory made to be shared (shared.py); a caller's ``bytes``, NumPy
array or the result of a plain call is not. Copying such a job through shared memory
costs two passes over every byte, beside the AES (engine.py, _Staging). Instead a worker
reads a few hundred KiB of its piece straight from this process into a buffer of its
own that stays in its cache, seals or opens it there, and writes the result straight
back: the caller's memory is read and written once, as when the workers work in shared
memory, and the pages of a fresh result are first touched by the workers, at once.

The kernel allows it where this process could be traced by its children: the same user,
and no Yama ``ptrace_scope`` of 1 or more, which admits only a tracer's descendants. The
engine asks once (``can_reach``) and copies through shared memory where it may not.
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any


class _Span(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)  # (CDLL: the copies run without the GIL)
for _name in ("process_vm_readv", "process_vm_writev"):
    getattr(_libc, _name).argtypes = [ctypes.c_int, ctypes.POINTER(_Span), ctypes.c_ulong,
                                      ctypes.POINTER(_Span), ctypes.c_ulong, ctypes.c_ulong]
    getattr(_libc, _name).restype = ctypes.c_ssize_t


def address_of(view: memoryview) -> int:
    """Where a contiguous buffer (read-only ones too) starts in this process."""
    import numpy as np

    return int(np.frombuffer(view, np.uint8).ctypes.data) if len(view) else 0


def _move(call: Any, pid: int, local: int, remote: int, nbytes: int) -> None:
    """All of ``nbytes`` between this process at ``local`` and ``pid`` at ``remote``; the
    kernel may move less than asked at once."""
    done = 0
    while done < nbytes:
        here, there = _Span(local + done, nbytes - done), _Span(remote + done, nbytes - done)
        moved = call(pid, ctypes.byref(here), 1, ctypes.byref(there), 1, 0)
        if moved <= 0:
            code = ctypes.get_errno() if moved < 0 else errno.EFAULT
            raise OSError(code, f"reading or writing process {pid}'s memory: "
                                f"{os.strerror(code)}")
        done += moved


def read(pid: int, address: int, into: memoryview) -> None:
    """``len(into)`` bytes of process ``pid`` at ``address`` into ``into`` (writable)."""
    _move(_libc.process_vm_readv, pid, address_of(into), address, len(into))


def write(pid: int, address: int, data: memoryview) -> None:
    """``data`` into process ``pid``'s memory at ``address``."""
    _move(_libc.process_vm_writev, pid, address_of(data), address, len(data))
