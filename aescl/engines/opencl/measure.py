"""The OpenCL engine's own figures for ``aescl bench``: kernel build times, pinned
transfer rates, and a mode's kernels on data already in device memory (kernel-only by
the events' profiling, and resident: enqueue to completion)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cached_property
from typing import Any

import numpy as np
import pyopencl as cl

from ...devices import Device
from ...timing import gb_s, repeat, wall
from ..interface import BlockTransform
from .kernels import aes_options, key_argument, time_builds
from .runtime import device_runtime
from .tuning import launch_config
from .workers import OpenclBlocks, OpenclHostChunks


def _event_seconds(events: Iterable[Any]) -> float:
    total = 0.0
    for event in events:
        event.wait()
        total += (event.profile.end - event.profile.start) * 1e-9
    return total


def _span_seconds(events: list[Any]) -> float:
    """From the start of the first command to the end of the last (an in-order queue)."""
    events[-1].wait()
    return (events[-1].profile.end - events[0].profile.start) * 1e-9


def build_times(device: Device) -> dict[str, Any]:
    """Build plus one launch of the AES-128 CTR kernel, cold and from the cached binary."""
    rt = device_runtime(device)
    config = launch_config(device)
    options = aes_options(10, "host", config)
    block = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, 16)
    round_keys = key_argument(bytes(16), "host", False)

    def first_launch(program: Any) -> None:
        ctr = cl.Kernel(program, "aes_ctr_xor")
        ctr.set_args(block, block, np.uint64(1), *[np.uint64(0)] * 4, round_keys)
        group = (config.work_group_size,)  # code generation may depend on the group size
        cl.enqueue_nd_range_kernel(rt.queue, ctr, group, group).wait()

    cold, warm = time_builds(device, "aes_ctr.cl", options, first_launch)
    return {"kernel": "aes_ctr.cl (AES-128), build and first launch",
            "cold_s": round(cold, 4), "warm_s": None if warm is None else round(warm, 4)}


def transfer_rates(device: Device, nbytes: int, min_seconds: float) -> dict[str, Any]:
    """Copies between a pinned (host-allocated, mapped) buffer and device memory."""
    rt = device_runtime(device)
    flags = cl.mem_flags
    device_buffer = cl.Buffer(rt.context, flags.READ_WRITE, nbytes)
    pinned = cl.Buffer(rt.context, flags.READ_WRITE | flags.ALLOC_HOST_PTR, nbytes)
    host, _ = cl.enqueue_map_buffer(rt.queue, pinned, cl.map_flags.READ | cl.map_flags.WRITE,
                                    0, (nbytes,), np.uint8)
    host[:] = 1
    try:
        to_device = repeat(lambda: _event_seconds(
            [cl.enqueue_copy(rt.queue, device_buffer, host, is_blocking=False)]), min_seconds)
        to_host = repeat(lambda: _event_seconds(
            [cl.enqueue_copy(rt.queue, host, device_buffer, is_blocking=False)]), min_seconds)
    finally:
        host.base.release()
    return {"bytes": nbytes, "pinned_h2d_gb_s": gb_s(nbytes, to_device),
            "pinned_d2h_gb_s": gb_s(nbytes, to_host)}


class _DeviceJob:
    """One configuration (``mode``: ctr, ecb-encrypt, ecb-decrypt or gcm-chunked) on one
    device, on device buffers."""

    def __init__(self, device: Device, mode: str, key: bytes, iv: bytes) -> None:
        self.device, self.mode, self.key, self.iv = device, mode, key, iv
        self.queue = device_runtime(device).queue

    @cached_property
    def chunks(self) -> OpenclHostChunks:
        """The chunked format's chunks for this job (its key and base nonce)."""
        return OpenclHostChunks(self.key, self.iv, self.device)

    def resident(self, source: Any, target: Any, nbytes: int) -> Callable[[], list[Any]]:
        """Enqueue the work on device buffers; returns a function giving its events."""
        if self.mode == "gcm-chunked":  # (from the plaintext into the sealed layout)
            chunks = self.chunks
            return lambda: chunks.device_seal(source, target, nbytes)
        transform = BlockTransform(
            self.key, decrypt=self.mode == "ecb-decrypt",
            counter=int.from_bytes(self.iv, "big") if self.mode == "ctr" else None)
        launch = OpenclBlocks(self.device, transform).device_launch()
        return lambda: [launch(self.queue, source, target, nbytes // 16)]


def resident_seconds(device: Device, mode: str, key: bytes, iv: bytes, data: np.ndarray,
                     output_bytes: int, min_seconds: float) -> tuple[float, float]:
    """Seconds of the kernel-only and the device-resident figures of ``mode`` over
    ``data`` (uploaded first), its output ``output_bytes`` long."""
    return _measure_resident(_DeviceJob(device, mode, key, iv), data, output_bytes,
                             min_seconds)


def _measure_resident(work: _DeviceJob, data: np.ndarray, output_bytes: int,
                      min_seconds: float) -> tuple[float, float]:
    """Seconds of the kernel-only and the device-resident figures."""
    size = data.nbytes
    context = device_runtime(work.device).context
    flags = cl.mem_flags
    source = cl.Buffer(context, flags.READ_WRITE | flags.COPY_HOST_PTR, hostbuf=data)
    target = cl.Buffer(context, flags.READ_WRITE, max(size, output_bytes))
    cl.enqueue_copy(work.queue, target, source, byte_count=size)
    if work.mode == "gcm-chunked":  # never in place; several commands, timed end to end
        launch = work.resident(source, target, size)
        return (repeat(lambda: _span_seconds(launch()), min_seconds),
                repeat(lambda: wall(lambda: _span_seconds(launch())), min_seconds))
    in_place = work.resident(target, target, size)
    kernel = repeat(lambda: _event_seconds(in_place()), min_seconds)
    launch = work.resident(source, target, size)
    return kernel, repeat(lambda: wall(lambda: _event_seconds(launch())), min_seconds)


