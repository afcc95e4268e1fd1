"""Host buffers in and out of the cipher objects: accepted inputs, ``output=`` targets, slicing.

Every cipher object takes any C-contiguous bytes-like input (bytes, bytearray,
memoryview, numpy array) and may write into a caller's ``output=`` buffer
instead of returning bytes, as pycryptodome's objects do.

The modes, the scheduler and the chunked format hold data as flat byte
memoryviews, so that a job on the host engine never imports numpy (it took
0.1 s of every CLI run); the OpenCL engines turn them into numpy arrays with
:func:`input_array` and :func:`output_array`.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import sys
from typing import TYPE_CHECKING, Any, TypeAlias

from .keyschedule import BLOCK_SIZE

if TYPE_CHECKING:
    import numpy as np

    from .devices import Device

BytesLike: TypeAlias = "bytes | bytearray | memoryview | np.ndarray"

_MAX_SLICE_BYTES = 256 << 20
# From this size a new buffer is an anonymous mapping: its pages are zero-filled by the
# kernel when first written, as numpy's empty arrays are, instead of cleared up front.
_MAPPED_BYTES = 1 << 20


def default_slice_bytes(device: Device) -> int:
    """Largest host-to-device slice: one allocation, at most a quarter of device memory."""
    limit = min(device.max_alloc_bytes, device.global_mem_bytes // 4, _MAX_SLICE_BYTES)
    return max(BLOCK_SIZE, limit - limit % BLOCK_SIZE)


def _host_memory(data: Any) -> Any:
    """``data`` itself, or for an array in host memory that only DLPack exports (a CPU
    torch tensor), a NumPy view of it."""
    if not isinstance(data, (bytes, bytearray, memoryview)) and hasattr(data, "__dlpack__") \
            and not hasattr(data, "__array_interface__"):
        try:
            memoryview(data)
        except TypeError:
            import numpy as np

            return np.from_dlpack(data)
    return data


IN_PLACE_REFUSED = "output overlaps the input: a chunked call cannot work in place"
OVERLAP_REFUSED = ("output partly overlaps the input: pass the input itself (in place) or "
                   "memory apart from it")


def check_in_place_or_apart(source_at: int, output_at: int, nbytes: int) -> None:
    """Refuse an ``output=`` of ``nbytes`` at ``output_at`` that partly overlaps the input
    at ``source_at`` (addresses or offsets in one memory). The block modes work in place
    (each block is read before it is written), but a shifted overlap reads bytes a
    launch, a thread or an engine already wrote, and which depends on the device."""
    if source_at != output_at and abs(source_at - output_at) < nbytes:
        raise ValueError(OVERLAP_REFUSED)


def check_host_in_place_or_apart(source: memoryview, output: memoryview) -> None:
    """:func:`check_in_place_or_apart` for host buffers. (numpy, with ``output=`` only.)"""
    if not (source.nbytes and output.nbytes):
        return
    import numpy as np

    def address(view: memoryview) -> int:
        return int(np.frombuffer(view, np.uint8).__array_interface__["data"][0])

    check_in_place_or_apart(address(source), address(output), min(source.nbytes,
                                                                 output.nbytes))


def check_apart(source: memoryview, output: Any) -> None:
    """Refuse an ``output=`` in the input's memory, in place or overlapping it, for the
    chunked format's calls: they write each chunk at another offset than they read it
    (a call would read what it had already written), and a failure zeroes ``output``,
    which would wipe the input. (numpy is imported here, with ``output=`` only.)"""
    import numpy as np

    target = memoryview(_host_memory(output))
    if not (source.nbytes and target.nbytes and target.c_contiguous):
        return  # (nothing to share; a non-contiguous output is refused as an output)
    if np.may_share_memory(np.frombuffer(source, np.uint8), np.frombuffer(target, np.uint8)):
        raise ValueError(IN_PLACE_REFUSED)


def byte_view(data: Any) -> memoryview:
    """``data`` as a flat memoryview of bytes (no copy)."""
    view = memoryview(_host_memory(data))
    if not view.c_contiguous:
        raise ValueError("data must be C-contiguous")
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def output_view(output: Any, length: int) -> memoryview:
    """A caller's ``output=`` buffer as a flat writable memoryview of ``length`` bytes."""
    view = memoryview(_host_memory(output))
    if view.readonly or not view.c_contiguous:
        raise TypeError("output must be a bytearray, a writable memoryview or a writable, "
                        "C-contiguous numpy array")
    view = view if view.format == "B" and view.ndim == 1 else view.cast("B")
    if len(view) != length:
        raise ValueError(f"output must be {length} bytes long, not {len(view)}")
    return view


def new_buffer(length: int) -> memoryview:
    """A new writable buffer of ``length`` bytes, for a result the caller did not place."""
    if length >= _MAPPED_BYTES:
        if hasattr(mmap, "MAP_PRIVATE") and hasattr(mmap, "MAP_ANONYMOUS"):
            # Private: ``mmap(-1, n)`` alone maps shared memory, whose pages fault in
            # through the kernel's shmem, without huge pages (256 MiB of chunks opened
            # into it ran at 0.81 GB/s on the 2-core CI kind, 1.59 into private memory
            # advised into huge pages).
            memory = mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        else:
            memory = mmap.mmap(-1, length)
        if hasattr(mmap, "MADV_HUGEPAGE"):  # (see advise_huge_pages)
            memory.madvise(mmap.MADV_HUGEPAGE)
        return memoryview(memory)
    return memoryview(bytearray(length))


_HUGE_PAGE = 2 << 20


def advise_huge_pages(address: int, length: int) -> None:
    """Ask Linux to back the whole 2 MiB pages inside ``address .. address + length`` (a
    new result, not yet written) with huge pages. Where transparent huge pages are
    given only on request (``madvise``, the default of many distributions), a fresh
    result's first touch otherwise faults it in 4 KiB pages, which cost more than the
    AES-GCM written into them: 256 MiB sealed by the host engine on the 2-core CI kind
    ran at 0.9-1.4 GB/s without, 1.3-2.3 with (docs/benchmarks). Nothing where the
    kernel or the platform says no."""
    advise = getattr(mmap, "MADV_HUGEPAGE", None)
    first = -(-address // _HUGE_PAGE) * _HUGE_PAGE
    end = (address + length) // _HUGE_PAGE * _HUGE_PAGE
    if advise is None or end <= first:
        return
    libc = _libc()
    if libc is not None:
        libc.madvise(first, end - first, advise)  # (a refusal changes nothing: ignored)


@functools.cache
def _libc() -> Any:
    """The C library's ``madvise``, where ctypes finds it (None elsewhere)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        madvise = libc.madvise
    except (AttributeError, OSError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return libc


class BytesResult:
    """A result the caller gets as ``bytes`` (pycryptodome's type), written in place:
    ``view`` is writable memory that becomes the returned object, with no copy out of a
    second buffer. Every byte of ``view`` must be written before :meth:`done`.

    From ``_MAPPED_BYTES`` on, in CPython, the memory is a new bytes object's own: made
    with ``PyBytes_FromStringAndSize(NULL, n)`` (contents undefined until written), seen
    through a view of its address, and handed out by ``done`` only. It is unshared and
    unhashed until then, so writing it breaks no promise of immutability that anyone
    could observe. Its pages are first touched by whatever writes them (the engine's
    threads), not by one thread up front, and on Linux in huge pages where the kernel
    gives them (:func:`advise_huge_pages`). Elsewhere, and for small results, a
    bytearray is copied into bytes once at the end. (256 MiB sealed on the 2-core CI
    kind: the final copy was 0.32 of 0.72 s.)"""

    def __init__(self, length: int) -> None:
        self._bytes: bytes | None = None
        if length >= _MAPPED_BYTES and sys.implementation.name == "cpython":
            import ctypes

            self._bytes = _bytes_of_size(length)
            at = id(self._bytes) + bytes.__basicsize__ - 1  # (ob_sval: the first byte)
            memory = (ctypes.c_char * length).from_address(at)
            # Any view of the memory keeps the object alive: an engine that held one past
            # the call would otherwise be left pointing at freed memory.
            memory.owner = self._bytes
            self.view = memoryview(memory).cast("B")
            advise_huge_pages(at, length)
        else:
            self.view = memoryview(bytearray(length))

    def done(self) -> bytes:
        """The result, once every byte of ``view`` is written."""
        result = self._bytes if self._bytes is not None else bytes(self.view)
        self._bytes = None
        with contextlib.suppress(BufferError):  # (a view an engine still holds keeps it)
            self.view.release()
        return result


def _bytes_of_size(length: int) -> bytes:
    """A new bytes object of ``length`` bytes whose contents are not yet written."""
    made: bytes = _bytes_from_size()(None, length)
    return made


@functools.cache
def _bytes_from_size() -> Any:
    """CPython's ``PyBytes_FromStringAndSize``, as a prototype of aescl's own (setting
    argtypes on ``ctypes.pythonapi``'s shared one would change it for everyone)."""
    import ctypes

    prototype = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_char_p, ctypes.c_ssize_t)
    return prototype(("PyBytes_FromStringAndSize", ctypes.pythonapi))


def wipe(view: memoryview) -> None:
    """Zero a buffer (plaintext that must not be released)."""
    step = _MAPPED_BYTES
    for start in range(0, len(view), step):
        part = view[start : start + step]
        part[:] = bytes(len(part))


def finish(result: Any, output: Any) -> bytes | None:
    return bytes(result) if output is None else None


def input_array(data: Any) -> np.ndarray:
    """``data`` as a flat uint8 numpy array (no copy), for the OpenCL engines."""
    import numpy as np

    return np.frombuffer(byte_view(data), dtype=np.uint8)


def output_array(output: Any, length: int) -> np.ndarray:
    """A caller's ``output=`` buffer as a flat uint8 numpy array, for the OpenCL engines."""
    import numpy as np

    return np.frombuffer(output_view(output, length), dtype=np.uint8)
