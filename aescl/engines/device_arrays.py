"""Device arrays: which engine takes an array that lies in a device's memory.

Each kind of device array is an :class:`ArrayKind` on its engine's line in
engines/registry.py: the test that recognises it without importing anything (no one
holds a torch tensor before importing torch), how its bytes are counted, and the
engine package that works on it, imported only when such an array first comes. The
modes and the chunked format classify an array once per call
(:func:`aescl.engines.registry.array_kind_of`) and go through its :class:`ArrayKind`;
they name no engine.

An engine package that takes device arrays exports, from its root, three classes:

* ``ArrayBlocks(transform, rule)``: ECB or CTR (a ``BlockTransform``) over arrays of its
  kind, called as ``job(data, output, first_block=0, skip=0)``: a new array like
  ``data``, or None into ``output``;
* ``ArrayGhash(key, multipliers)``: GHASH partial sums of whole blocks of such arrays
  (``partial_sum``, ``read``, ``host_partial_sum`` for long AAD): GCM on device arrays;
* ``ArrayChunks(chunk_key, base_nonce, rule)``: the chunked format's chunks between
  such arrays (``seal``, ``open``), and ``ArrayChunks.read(array, offset, nbytes)``;
  ``ArrayChunks.for_messages(key, rule)`` makes the job of many GCM messages
  (``seal_messages``, ``open_messages``: programs/device_messages.py), which its
  caller keeps across calls;
* ``ArrayBytes``: ``empty(like, nbytes)``, ``write(array, offset, data)``,
  ``finish(like, result)``, ``stack(arrays)`` (their bytes as the rows of one 2-D
  array, or None) and ``device_of(array)``, for a result a call lays out itself
  (aescl.AESGCM).

``rule`` is where a cipher's devices let the arrays run (``teams.array_device_rule``).
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

# DLPack's device types of memory that kernels on a CUDA GPU work on: kDLCUDA and
# kDLCUDAManaged.
_DLPACK_CUDA_TYPES = (2, 13)


def is_torch_tensor(data: Any) -> bool:
    """Whether ``data`` is a torch tensor, told without importing torch."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(data, torch.Tensor)


def on_cuda(data: Any) -> bool:
    """Whether ``data`` is a CUDA device array (the CUDA engine's): a torch tensor on a
    GPU, an object with a CUDA array interface, or one that exports DLPack from CUDA
    memory and nothing else (cuda.core's Buffer). Host arrays and CPU tensors are none
    of these."""
    if is_torch_tensor(data):  # (torch builds the interface's dict in Python at each look)
        return bool(data.is_cuda)
    try:
        if isinstance(getattr(data, "__cuda_array_interface__", None), dict):
            return True
    except (AttributeError, RuntimeError, TypeError):  # (a CPU torch tensor raises)
        return False
    return dlpack_on_cuda(data)


def dlpack_on_cuda(data: Any) -> bool:
    """Whether ``data`` says, through DLPack's ``__dlpack_device__``, that it lies in
    CUDA memory (a NumPy array says it lies on the CPU)."""
    return dlpack_gpu(data) is not None


def dlpack_gpu(data: Any) -> int | None:
    """The GPU that ``data`` says, through DLPack's ``__dlpack_device__``, it lies on;
    None where it says no GPU, or nothing."""
    where = getattr(data, "__dlpack_device__", None)
    if where is None:
        return None
    try:
        kind, ordinal = where()
    except (BufferError, RuntimeError, TypeError, ValueError):
        return None
    return int(ordinal) if int(kind) in _DLPACK_CUDA_TYPES else None


def cuda_nbytes(data: Any) -> int:
    """The bytes of a CUDA device array (:func:`on_cuda`): its elements times their size."""
    if is_torch_tensor(data):
        return int(data.nbytes)
    interface = getattr(data, "__cuda_array_interface__", None)
    if interface is None:  # described by DLPack alone: read through cuda.core (aescl[cuda])
        from cuda.core.utils import StridedMemoryView

        view = StridedMemoryView.from_dlpack(data, -1)  # (-1: only its size is read)
        return int(view.size) * view.dtype.itemsize
    count = 1
    for extent in interface["shape"]:
        count *= extent
    return count * int(interface["typestr"][2:])


def on_opencl(data: Any) -> bool:
    """Whether ``data`` is a pyopencl array (the OpenCL engine's device arrays), told
    without importing pyopencl. A bare ``cl.Buffer`` is refused here: it has no queue
    to order the work on."""
    module = sys.modules.get("pyopencl.array")
    if module is not None and isinstance(data, module.Array):
        return True
    opencl = sys.modules.get("pyopencl")
    if opencl is not None and isinstance(data, opencl.MemoryObject):
        raise TypeError("a cl.Buffer has no queue to run on: pass it as a pyopencl array, "
                        "pyopencl.array.Array(queue, size, numpy.uint8, data=buffer, "
                        "offset=offset)")
    return False


def _opencl_nbytes(data: Any) -> int:
    return int(data.nbytes)


@functools.cache
def _engine_package(name: str) -> ModuleType:
    """``aescl.engines.<name>``, imported once (an import each call cost about a
    microsecond of a small call's twenty)."""
    return importlib.import_module(f"{__package__}.{name}")


@dataclass(frozen=True)
class ArrayKind:
    """One kind of device array and the engine that takes it."""

    name: str  # the engine's name, as Device.engine says it ("cuda", "opencl")
    arrays: str  # what the arrays are, for messages
    install: str  # what brings the engine, where its import fails
    holds: Callable[[Any], bool]  # whether an object is an array of this kind
    nbytes: Callable[[Any], int]  # the bytes of such an array

    def engine(self) -> ModuleType:
        """The engine package (``aescl.engines.<name>``), imported on first use."""
        try:
            return _engine_package(self.name)
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError(f"{self.arrays} need the {self.name} engine: {self.install}"
                              ) from exc

    def blocks(self, transform: Any, rule: Any) -> Any:
        """The engine's ECB or CTR job over arrays of this kind."""
        return self.engine().ArrayBlocks(transform, rule)

    def ghash(self, key: bytes, multipliers: Any) -> Any:
        """The engine's GHASH partial sums over arrays of this kind, for one key."""
        return self.engine().ArrayGhash(key, multipliers)

    def chunks(self, chunk_key: bytes, base_nonce: bytes, rule: Any) -> Any:
        """The engine's sealer and opener of one message's chunks in such arrays."""
        return self.engine().ArrayChunks(chunk_key, base_nonce, rule)

    def messages(self, key: bytes, rule: Any) -> Any:
        """The engine's sealer and opener of many GCM messages under ``key`` in such
        arrays (its chunk job, the key as the chunk key: seal_messages, open_messages),
        to be kept by the caller across calls."""
        return self.engine().ArrayChunks.for_messages(key, rule)

    def read(self, array: Any, offset: int, nbytes: int) -> bytes:
        """Bytes ``offset .. offset + nbytes`` of an array (a header), after the work
        before them."""
        return self.engine().ArrayChunks.read(array, offset, nbytes)  # type: ignore[no-any-return]

    def empty(self, like: Any, nbytes: int) -> Any:
        """A new flat uint8 array of ``nbytes`` beside ``like`` (its device, library)."""
        return self.engine().ArrayBytes.empty(like, nbytes)

    def write(self, array: Any, offset: int, data: bytes) -> None:
        """Host ``data`` into bytes ``offset ..`` of ``array``, after the work before."""
        self.engine().ArrayBytes.write(array, offset, data)

    def device_of(self, array: Any) -> Any:
        """Where ``array`` lies (a GPU's ordinal, an OpenCL context): arrays alike in it
        can go in one launch."""
        return self.engine().ArrayBytes.device_of(array)

    def stack(self, arrays: list[Any]) -> Any:
        """The bytes of ``arrays`` (all of this kind) as the rows of one new 2-D uint8
        array of it, in one step of the library's; None where it cannot (aescl.AESGCM
        then goes message by message)."""
        return self.engine().ArrayBytes.stack(arrays)

    def finish(self, like: Any, result: Any) -> Any:
        """A result made by :meth:`empty` as the kind of array ``like`` is."""
        return self.engine().ArrayBytes.finish(like, result)


# The two kinds, each on its engine's line in engines/registry.py.
CUDA_ARRAYS = ArrayKind("cuda", "CUDA arrays", "pip install 'aescl[cuda]'", on_cuda, cuda_nbytes)
OPENCL_ARRAYS = ArrayKind("opencl", "pyopencl arrays", "pip install pyopencl", on_opencl,
                          _opencl_nbytes)
