"""The CUDA engine's own figures for ``aescl bench``: the NVRTC build, the launch shape,
pinned transfer rates, and a mode's kernels on data already on the GPU (kernel-only by
CUDA events around the work, and resident: enqueue to completion, by the wall clock)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import ghash, keyschedule
from ..._cache import (
    MAX_BINARY_BYTES,
    binary_of_entry,
    cache_root,
    disk_cache_enabled,
    read_cache_file,
)
from ...devices import Device
from ...timing import gb_s, repeat, wall
from ..interface import BlockTransform, tuning_enabled
from ..programs import device_chunks
from ..start_up import start_seconds
from .kernels import TABLE_LANES, cache_key, compile_cubin, module
from .pipeline import pinned_empty
from .runtime import CudaBytes, checked, cuda_device, ordinal_of
from .tuning import launch_shape, stored
from .workers import CudaBlocks, CudaChunkKernels


def build_times(device: Device) -> dict[str, Any]:
    """NVRTC's build of the AES-128 CTR kernel (cold), and its load from the cubin in the
    disk cache (warm), each with the kernel looked up in the loaded module."""
    from cuda.core import ObjectCode

    gpu = cuda_device(ordinal_of(device))
    defines = gpu.defines(10)
    started = time.perf_counter()
    cubin = compile_cubin("aes_ctr.cl", defines, gpu.arch)
    ObjectCode.from_cubin(cubin).get_kernel("aes_ctr_xor")
    cold = time.perf_counter() - started
    module("aes_ctr.cl", defines, gpu.arch)  # (fills the disk cache)
    warm = None
    if disk_cache_enabled():
        path = cache_root() / "cuda" / f"{cache_key('aes_ctr.cl', defines, gpu.arch)}.cubin"
        started = time.perf_counter()
        entry = read_cache_file(path, MAX_BINARY_BYTES)
        cubin = binary_of_entry(entry) if entry is not None else None
        if cubin is None:
            return {"kernel": f"aes_ctr.cl (AES-128), NVRTC for sm_{gpu.arch}",
                    "cold_s": round(cold, 4), "warm_s": None}
        ObjectCode.from_cubin(cubin).get_kernel("aes_ctr_xor")
        warm = time.perf_counter() - started
    return {"kernel": f"aes_ctr.cl (AES-128), NVRTC for sm_{gpu.arch}",
            "cold_s": round(cold, 4), "warm_s": None if warm is None else round(warm, 4)}


def _event_seconds(stream: int, work: Callable[[], None]) -> float:
    """Seconds between CUDA events recorded on ``stream`` before and after ``work``."""
    from cuda.bindings import driver

    start, end = (checked(driver.cuEventCreate(0)) for _ in range(2))
    try:
        checked(driver.cuEventRecord(start, stream))
        work()
        checked(driver.cuEventRecord(end, stream))
        checked(driver.cuEventSynchronize(end))
        return float(checked(driver.cuEventElapsedTime(start, end))) / 1e3
    finally:
        driver.cuEventDestroy(start)
        driver.cuEventDestroy(end)


def transfer_rates(device: Device, nbytes: int, min_seconds: float) -> dict[str, Any]:
    """Copies between pinned host memory and GPU memory, timed by CUDA events."""
    from cuda.bindings import driver

    ordinal = ordinal_of(device)
    cuda_device(ordinal).core.set_current()
    host = pinned_empty(nbytes, ordinal)
    host[:] = 1
    memory = checked(driver.cuMemAlloc(nbytes))
    stream = checked(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING))
    try:
        to_device = repeat(lambda: _event_seconds(stream, lambda: checked(
            driver.cuMemcpyHtoDAsync(memory, host, nbytes, stream))), min_seconds)
        to_host = repeat(lambda: _event_seconds(stream, lambda: checked(
            driver.cuMemcpyDtoHAsync(host, memory, nbytes, stream))), min_seconds)
    finally:
        driver.cuStreamSynchronize(stream)
        driver.cuStreamDestroy(stream)
        driver.cuMemFree(memory)
    return {"bytes": nbytes, "pinned_h2d_gb_s": gb_s(nbytes, to_device),
            "pinned_d2h_gb_s": gb_s(nbytes, to_host)}


def device_figures(device: Device, nbytes: int, min_seconds: float) -> dict[str, Any]:
    gpu = cuda_device(ordinal_of(device))
    shape = launch_shape(gpu.core.device_id)
    tuning = stored(gpu.core.device_id) if tuning_enabled() else None
    return {"build": build_times(device), "start_s": start_seconds(device),
            "launch": {"work_group_size": shape.threads,
                       "max_work_groups": gpu.sms * shape.blocks_per_sm,
                       "table_lanes": TABLE_LANES, "round_tables": gpu.round_tables,
                       "tuned": None if tuning is None else {
                           "date": tuning.date, "gb_s": tuning.chosen.gb_s,
                           "default_gb_s": tuning.default.gb_s,
                           "trials": len(tuning.trials), "seconds": tuning.seconds}},
            "transfer": transfer_rates(device, nbytes, min_seconds)}


def resident_seconds(ordinal: int, mode: str, key: bytes, iv: bytes, data: np.ndarray,
                     output_bytes: int, min_seconds: float) -> tuple[float, float]:
    """Seconds of the kernel-only and the device-resident figures of ``mode`` over
    ``data`` (uploaded first), its output ``output_bytes`` long: CTR and ECB one kernel;
    the chunked format its whole device work (device_chunks.seal: J0s, CTR from the
    plaintext's layout into the sealed one, GHASH and the tags), out of place: more than
    the OpenCL engine's figure, which is its GCM batch in place over slots."""
    from cuda.bindings import driver

    cuda_device(ordinal).core.set_current()
    stream = int(checked(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)))
    source = int(checked(driver.cuMemAlloc(max(16, data.nbytes))))
    target = int(checked(driver.cuMemAlloc(max(16, data.nbytes, output_bytes))))
    try:
        checked(driver.cuMemcpyHtoD(source, np.ascontiguousarray(data), data.nbytes))
        work = _work(ordinal, mode, key, iv, stream, CudaBytes(source, data.nbytes, ordinal,
                                                               stream, True),
                     CudaBytes(target, output_bytes, ordinal, stream, False))
        kernel = repeat(lambda: _event_seconds(stream, work), min_seconds)

        def resident() -> None:
            work()
            checked(driver.cuStreamSynchronize(stream))

        return kernel, repeat(lambda: wall(resident), min_seconds)
    finally:
        driver.cuStreamSynchronize(stream)
        driver.cuMemFree(source)
        driver.cuMemFree(target)
        driver.cuStreamDestroy(stream)


def _work(ordinal: int, mode: str, key: bytes, iv: bytes, stream: int, source: CudaBytes,
          target: CudaBytes) -> Callable[[], None]:
    if mode == "gcm-chunked":
        h = ghash.hash_subkey(key)

        def seal() -> None:
            kernels = CudaChunkKernels(key, h, ordinal, source)
            try:
                device_chunks.seal(kernels, iv, source, target)
            finally:
                kernels.release_all()
        return seal
    keyschedule.rounds_for_key(key)
    blocks = CudaBlocks(BlockTransform(
        key, decrypt=mode == "ecb-decrypt",
        counter=int.from_bytes(iv, "big") if mode == "ctr" else None), ordinal)
    count = source.nbytes // 16
    return lambda: blocks.launch(stream, source.pointer, target.pointer, count, 0)
