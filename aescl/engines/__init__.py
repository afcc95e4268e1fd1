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
the interface. :mod:`aescl.engines.registry` holds one line per engine; through it
:func:`engine_for` makes a device's engine, importing an engine's package (and for
OpenCL, numpy and pyopencl; for CUDA, NVIDIA's bindings) only when a device of it is
first used.
"""

from __future__ import annotations

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
from .registry import engine_for

__all__ = [
    "BLOCK_SIZE", "DEFAULT_BATCH_CHUNKS", "KEY_SCHEDULES", "MAX_BATCH_CHUNKS", "MODE_GCM",
    "BlockTransform", "BlockWorker", "ChunkWorker", "Engine", "Ranges", "check_key_schedule",
    "engine_for", "gcm_nonce", "tuning_enabled",
]
