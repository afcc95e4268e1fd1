"""CUDA device arrays as the CUDA engine takes them: any object with
``__cuda_array_interface__`` (PyTorch, CuPy, JAX, Numba), its bytes in C order.

Any dtype is taken as its bytes: a float32 tensor of n elements is 4n bytes, and
the result has the input's dtype and shape. Arrays must be C-contiguous, and an
``output=`` writable. Work is enqueued on the stream the array's library is
working on (PyTorch's or CuPy's current stream for that GPU; for others the stream
the interface names, else the legacy default stream), so it follows the work that
produced the input and precedes the work the caller enqueues next on that stream.
"""

from __future__ import annotations

import sys
from typing import Any

from ..._arrays import cuda_nbytes, on_cuda
from .engine import CudaBytes, _check


def _library(obj: Any) -> str:
    return type(obj).__module__.split(".")[0]


def is_cuda_array(obj: Any) -> bool:
    """Whether ``obj`` is an array in CUDA device memory (a CPU tensor is not)."""
    return on_cuda(obj)


def _producer_stream(obj: Any, device: int, interface: dict[str, Any]) -> int:
    library = _library(obj)
    if library == "torch":
        torch = sys.modules["torch"]
        return int(torch.cuda.current_stream(device).cuda_stream)
    if library == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(device):
            return int(cupy.cuda.get_current_stream().ptr)
    # The interface's stream (version 3): 1 and 2 are the legacy and per-thread default
    # streams, which the driver takes as these very handles; None asks for no ordering.
    return int(interface.get("stream") or 0)


def cuda_bytes(obj: Any, what: str, writable: bool = False) -> CudaBytes:
    """The bytes of a CUDA device array. Raises ValueError for one that is not
    C-contiguous, or read-only where it is written (``what`` names it)."""
    from cuda.bindings import driver

    interface = obj.__cuda_array_interface__
    pointer, readonly = interface["data"]
    shape = tuple(interface["shape"])
    itemsize = int(interface["typestr"][2:])  # (the bytes of one element)
    strides = interface.get("strides")
    if strides is not None:
        expected, step = [], itemsize
        for extent in reversed(shape):
            expected.append(step)
            step *= extent
        if any(extent > 1 and got != want
               for extent, got, want in zip(shape, strides, reversed(expected), strict=True)):
            raise ValueError(f"{what} is not contiguous: pass a C-contiguous array "
                             f"(e.g. .contiguous() or cupy.ascontiguousarray)")
    if writable and readonly:
        raise ValueError(f"{what} is read-only")
    nbytes = cuda_nbytes(obj)
    if nbytes == 0:
        device = _empty_array_device(obj)
    else:
        attribute = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        device = int(_check(driver.cuPointerGetAttribute(attribute, pointer)))
    return CudaBytes(int(pointer), nbytes, device, _producer_stream(obj, device, interface),
                     bool(readonly))


def _empty_array_device(obj: Any) -> int:
    device = getattr(obj, "device", None)
    index = getattr(device, "index", None) if device is not None else None
    if index is None:
        index = getattr(device, "id", 0) if device is not None else 0
    return int(index or 0)


def empty_like(obj: Any, device: int) -> Any:
    """A new array of ``obj``'s library, dtype and shape on GPU ``device``."""
    library = _library(obj)
    if library == "torch":
        return sys.modules["torch"].empty_like(obj)
    if library == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(device):
            return cupy.empty_like(obj)
    raise TypeError(f"aescl cannot make a {type(obj).__module__}.{type(obj).__name__} "
                    "for the result: pass output= (a writable CUDA array of the same size)")


def empty_bytes(obj: Any, device: int, nbytes: int) -> Any:
    """A new flat uint8 array of ``nbytes`` of ``obj``'s library on GPU ``device``."""
    library = _library(obj)
    if library == "torch":
        torch = sys.modules["torch"]
        return torch.empty(nbytes, dtype=torch.uint8, device=obj.device)
    if library == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(device):
            return cupy.empty(nbytes, cupy.uint8)
    raise TypeError(f"aescl cannot make a {type(obj).__module__}.{type(obj).__name__} "
                    "for the result: pass a torch tensor or a CuPy array")
