"""aescl/engines/cuda/runtime.py: driver calls checked, launch parameters, and the GPU's
stream-ordered memory pool.
"""

from __future__ import annotations

import pytest
from cuda_arrays import (
    needs_gpu,
)

import aescl


def test_a_launchs_parameters_point_at_each_arguments_bytes():
    """cuLaunchKernel reads each argument from its pointer, as many bytes as the kernel's
    parameter: an int as 64 bits, a numpy scalar or array as its own bytes."""
    import ctypes

    import numpy as np

    from aescl.engines.cuda.runtime import kernel_parameters

    key = np.arange(60, dtype="<u4")  # (a 240-byte argument by value, as the key's)
    arguments = [0x1122334455667788, np.uint32(7), np.frombuffer(bytes(range(16)), np.uint8),
                 key, 5, np.uint32(0xFFFFFFFF)]
    expected = [(0x1122334455667788).to_bytes(8, "little"), (7).to_bytes(4, "little"),
                bytes(range(16)), key.tobytes(), (5).to_bytes(8, "little"), b"\xff" * 4]
    storage, pointers = kernel_parameters(arguments)
    assert len(pointers) == len(arguments)
    for pointer, value in zip(pointers, expected, strict=True):
        assert ctypes.string_at(pointer, len(value)) == value
    assert pointers[0] == ctypes.addressof(ctypes.c_char.from_buffer(storage))
    assert all((pointer - pointers[0]) % 16 == 0 for pointer in pointers)  # (uint4's 16)
    # Arguments of the same kinds again, other values: the layout is reused, the bytes new.
    other = [1, np.uint32(2), np.frombuffer(bytes(16), np.uint8), key[::-1].copy(), 3,
             np.uint32(4)]
    storage, pointers = kernel_parameters(other)
    assert [ctypes.string_at(pointer, 8) for pointer in (pointers[0], pointers[4])] == [
        (1).to_bytes(8, "little"), (3).to_bytes(8, "little")]
    assert ctypes.string_at(pointers[3], 240) == key[::-1].tobytes()
    assert ctypes.string_at(pointers[5], 4) == (4).to_bytes(4, "little")


@needs_gpu
def test_a_failed_driver_call_raises_with_the_drivers_name_for_it():
    from cuda.bindings import driver

    from aescl.engines.cuda.runtime import checked, cuda_device

    cuda_device(0).make_current()  # (a context to allocate in)
    assert checked((driver.CUresult.CUDA_SUCCESS, 7)) == 7
    with pytest.raises(RuntimeError, match="CUDA_ERROR_INVALID_VALUE"):
        checked((driver.CUresult.CUDA_ERROR_INVALID_VALUE, None))
    with pytest.raises(RuntimeError, match="CUDA_ERROR_INVALID_VALUE"):
        checked(driver.cuMemAlloc(0))  # (a size of zero is refused)


@needs_gpu
def test_chunked_scratch_stays_in_aescls_pool_and_leaves_no_trace_in_later_calls():
    """Opening waits for its tags. Its freed scratch then stays mapped in aescl's own pool
    on the GPU (runtime.Gpu.memory_pool, up to POOL_KEEPS), where the device's
    default pool would give it back to the driver at that wait. Scratch comes back as
    earlier calls left it: here as all ones, and a short final chunk's slot (whose
    padding GHASH reads as zeros) still seals and opens as the host does."""
    torch = pytest.importorskip("torch")
    from cuda.bindings import driver

    from aescl.engines.cuda import runtime, workers
    from aescl.engines.cuda.arrays import cuda_bytes

    key, salt = bytes(range(32)), bytes(range(24))
    gpu = torch.cuda.current_device()
    attribute = driver.CUmemPool_attribute
    for size in (3, 16384 + 1000, 2 * 16384 + 16383):
        data = torch.randint(0, 256, (size,), dtype=torch.uint8, device="cuda")
        like = cuda_bytes(data, "data")
        memory = workers.StreamMemory(None, like)
        spans = [memory.scratch(16384, zeroed=False) for _ in range(8)]
        for span in spans:
            driver.cuMemsetD8Async(span.pointer, 0xFF, span.nbytes, like.stream)
            memory.release(span)
        expected = aescl.chunked.encrypt(key, data.cpu().numpy().tobytes(), salt=salt,
                                         device="host")
        sealed = aescl.chunked.encrypt(key, data, salt=salt)
        assert sealed.cpu().numpy().tobytes() == expected
        assert torch.equal(aescl.chunked.decrypt(key, sealed), data)
    torch.cuda.synchronize()
    pool = runtime.cuda_device(gpu).memory_pool()
    threshold = runtime.checked(driver.cuMemPoolGetAttribute(
        pool, attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD))
    assert int(threshold) == runtime.POOL_KEEPS
    assert int(runtime.checked(driver.cuMemPoolGetAttribute(
        pool, attribute.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT))) > 0


@needs_gpu
def test_the_gpu_of_a_pointer_is_the_one_its_memory_is_on():
    """runtime.pointer_gpu asks the driver itself: cuda.bindings' own call for the same
    attribute says 0 for every GPU (NVIDIA/cuda-python#2928), which on 2 x H200 sent
    work on GPU 1's arrays to GPU 0. Checked on every GPU here, with another GPU's
    context current where there is one."""
    from cuda.bindings import driver

    from aescl.engines.cuda.runtime import checked, cuda_device, pointer_gpu

    count = checked(driver.cuDeviceGetCount())
    for ordinal in range(count):
        cuda_device(ordinal).make_current()
        memory = checked(driver.cuMemAlloc(4096))
        try:
            cuda_device((ordinal + 1) % count).make_current()
            assert pointer_gpu(int(memory)) == ordinal
        finally:
            cuda_device(ordinal).make_current()
            driver.cuMemFree(memory)
