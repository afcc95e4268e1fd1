"""The OpenCL engine: a device's AES kernels (``cl/``) behind the engine interface.

* ``engine.py``: the engine, behind the engine interface;
* ``arrays.py``: ECB and CTR on a caller's pyopencl arrays, in their context and queue;
* ``workers.py``: its block and chunk workers (a kernel over a job's ranges);
* ``measure.py``: its own figures for ``aescl bench`` (builds, transfers, kernels);
* ``pipeline.py``: host data streamed through the device in overlapped pieces, and
  pinned host memory;
* ``runtime.py``: the one module holding the driver's state: a device's context and
  queue, its programs and kernels, scratch, and the lock that gives one job at a time a
  device (as ``cuda/runtime.py`` is the CUDA engine's);
* ``kernels.py``: launch settings, kernel sources, program builds and their disk cache;
* ``tuning.py``: launch settings per device, tuned on first use;
* ``gcm_kernels.py``: GCM's kernel set for one key (CTR with inc32, GHASH, tags, the
  fused kernel, GHASH's tables), over device buffers;
* ``gcm.py``: the GCM stream on host data (the device-array GCM's calls, staged).

The separate-process check of a CPU's AES instructions runs the public API, so it sits
above the engines, as ``aescl/_rounds_check.py`` (started by name from ``tuning.py``).

Only this package imports pyopencl (besides the device layer, which lists platforms).
Callers outside use the names below.
"""

from __future__ import annotations

from .arrays import OpenclArrayBlocks, OpenclArrayChunks, OpenclArrayGhash
from .engine import OpenclEngine
from .kernels import aes_options, time_builds
from .pipeline import pin_host_memory, pinned_empty
from .runtime import device_runtime
from .workers import OpenclBlocks, OpenclHostChunks

# The classes every engine that takes device arrays exports (engines/device_arrays.py).
ArrayBlocks, ArrayGhash, ArrayChunks = OpenclArrayBlocks, OpenclArrayGhash, OpenclArrayChunks

__all__ = ["ArrayBlocks", "ArrayChunks", "ArrayGhash", "OpenclHostChunks",
           "OpenclArrayBlocks", "OpenclArrayChunks", "OpenclArrayGhash", "OpenclBlocks",
           "OpenclEngine", "aes_options",
           "device_runtime", "pin_host_memory", "pinned_empty", "time_builds"]
