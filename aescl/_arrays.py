"""Host arrays in and out of the cipher objects: accepted inputs, ``output=`` targets, slicing.

Every cipher object takes any C-contiguous bytes-like input (bytes, bytearray,
memoryview, numpy array) and may write into a caller's ``output=`` buffer
instead of returning bytes, as pycryptodome's objects do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .devices import Device
from .keyschedule import BLOCK_SIZE

BytesLike = bytes | bytearray | memoryview | np.ndarray

_MAX_SLICE_BYTES = 256 << 20


def default_slice_bytes(device: Device) -> int:
    """Largest host-to-device slice: one allocation, at most a quarter of device memory."""
    limit = min(device.max_alloc_bytes, device.global_mem_bytes // 4, _MAX_SLICE_BYTES)
    return max(BLOCK_SIZE, limit - limit % BLOCK_SIZE)


def input_array(data: Any) -> np.ndarray:
    if isinstance(data, np.ndarray):
        if not data.flags.c_contiguous:
            raise ValueError("data must be C-contiguous")
        return data.reshape(-1).view(np.uint8)
    view = memoryview(data)
    if not view.c_contiguous:
        raise ValueError("data must be C-contiguous")
    return np.frombuffer(view.cast("B"), dtype=np.uint8)


def output_array(output: Any, length: int) -> np.ndarray:
    if isinstance(output, np.ndarray):
        array = output
        if not (array.flags.c_contiguous and array.flags.writeable):
            raise ValueError("output must be a writable, C-contiguous array")
        array = array.reshape(-1).view(np.uint8)
    else:
        view = memoryview(output)
        if view.readonly or not view.c_contiguous:
            raise TypeError("output must be a bytearray, a writable memoryview or a numpy array")
        array = np.frombuffer(view.cast("B"), dtype=np.uint8)
    if array.nbytes != length:
        raise ValueError(f"output must be {length} bytes long, not {array.nbytes}")
    return array


def finish(result: np.ndarray, output: Any) -> bytes | None:
    return result.tobytes() if output is None else None
