"""Engines: the peers that do the AES work, each a package behind one small interface.

* :mod:`aescl.engines.interface`: the interface itself (protocols, ``BlockTransform``,
  mode constants, nonce and key-schedule checks), which imports nothing above it;
* :mod:`aescl.engines.opencl`: an OpenCL device's kernels, streaming host data through
  its pinned, overlapped pipeline;
* :mod:`aescl.engines.host`: OpenSSL through ``cryptography`` on every core, on threads
  or in worker processes;
* :mod:`aescl.engines.cuda`: a CUDA GPU (``aescl[cuda]``) with the same kernels, built by
  NVRTC: host data staged through pinned memory, and CUDA device arrays.

Nothing outside an engine package reaches into it: callers use the package's root or
the interface. :func:`engine_for` makes a device's engine, importing an engine's
package (and for OpenCL, numpy and pyopencl; for CUDA, NVIDIA's bindings) only when a
device of it is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .interface import (
    BLOCK_SIZE,
    DEFAULT_BATCH_CHUNKS,
    KEY_SCHEDULES,
    MAX_BATCH_CHUNKS,
    MODE_GCM,
    BlockTransform,
    BlockWorker,
    ChunkWorker,
    Engine,
    Ranges,
    check_key_schedule,
    gcm_nonce,
    tuning_enabled,
)

if TYPE_CHECKING:
    from ..devices import Device

__all__ = [
    "BLOCK_SIZE", "DEFAULT_BATCH_CHUNKS", "KEY_SCHEDULES", "MAX_BATCH_CHUNKS", "MODE_GCM",
    "BlockTransform", "BlockWorker", "ChunkWorker", "Engine", "Ranges", "check_key_schedule",
    "engine_for", "gcm_nonce", "tuning_enabled",
]

_engines: dict[str, Engine] = {}


def engine_for(device: Device) -> Engine:
    """The engine of a device, made once per process."""
    existing = _engines.get(device.id)
    if existing is None or existing.device != device:
        if device.type == "host":
            from .host import HostEngine

            existing = HostEngine(device)
        elif device.is_cuda:
            from .cuda import CudaEngine

            existing = CudaEngine(device)
        else:
            from .opencl import OpenclEngine

            existing = OpenclEngine(device)
        _engines[device.id] = existing
    return existing
