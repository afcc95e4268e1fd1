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

from ..._arrays import cuda_nbytes, is_torch_tensor, on_cuda
from .engine import CudaBytes, _check


def _library(obj: Any) -> str:
    return type(obj).__module__.split(".")[0]


def is_cuda_array(obj: Any) -> bool:
    """Whether ``obj`` is an array in CUDA device memory (a CPU tensor is not)."""
    return on_cuda(obj)


def _torch_stream(device: int) -> int:
    """The handle of torch's current stream on a GPU. torch.cuda.current_stream builds
    a Stream object (7 µs on the H100 host, a quarter of a small call); the raw handle
    comes from the call torch's own compiled code uses, where this torch has it."""
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return int(raw(device))
    return int(torch.cuda.current_stream(device).cuda_stream)


def _producer_stream(obj: Any, device: int, interface: dict[str, Any]) -> int:
    library = _library(obj)
    if library == "torch":
        return _torch_stream(device)
    if library == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(device):
            return int(cupy.cuda.get_current_stream().ptr)
    # The interface's stream (version 3): 1 and 2 are the legacy and per-thread default
    # streams, which the driver takes as these very handles; None asks for no ordering.
    return int(interface.get("stream") or 0)


def cuda_bytes(obj: Any, what: str, writable: bool = False, stream: int | None = None
               ) -> CudaBytes:
    """The bytes of a CUDA device array. Raises ValueError for one that is not
    C-contiguous, or read-only where it is written (``what`` names it). ``stream``: the
    stream to order on, when the caller knows it (else the producer's, looked up)."""
    from cuda.bindings import driver

    if is_torch_tensor(obj):
        return _torch_bytes(obj, what, stream)
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
    if stream is None:
        stream = _producer_stream(obj, device, interface)
    return CudaBytes(int(pointer), nbytes, device, stream, bool(readonly))


def _torch_bytes(tensor: Any, what: str, stream: int | None) -> CudaBytes:
    """:func:`cuda_bytes` of a torch tensor, from its own attributes: what its array
    interface says, without the dict torch builds for it in Python at each look (a
    small call looks a few times). A torch tensor is never read-only."""
    if not tensor.is_contiguous():
        raise ValueError(f"{what} is not contiguous: pass a C-contiguous array "
                         f"(e.g. .contiguous() or cupy.ascontiguousarray)")
    device = tensor.device.index
    if stream is None:
        stream = _torch_stream(device)
    return CudaBytes(int(tensor.data_ptr()), int(tensor.nbytes), device, stream, False)


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
