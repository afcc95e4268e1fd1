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

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .arrays import OpenclArrayBlocks, OpenclArrayBytes, OpenclArrayChunks, OpenclArrayGhash
from .engine import OpenclEngine
from .kernels import aes_options, time_builds
from .pipeline import pin_host_memory, pinned_empty
from .runtime import device_runtime
from .workers import OpenclBlocks, OpenclHostChunks

if TYPE_CHECKING:
    import numpy as np

    from ...devices import Device

# What every engine exports (engines/registry.py), and every engine that takes device
# arrays (engines/device_arrays.py).
Engine = OpenclEngine
ArrayBlocks, ArrayGhash, ArrayChunks = OpenclArrayBlocks, OpenclArrayGhash, OpenclArrayChunks
ArrayBytes = OpenclArrayBytes


def host_memory(nbytes: int, chosen: Sequence[Device],
                shared: Callable[[], Any] | None) -> np.ndarray | None:
    """Pinned memory of the first OpenCL GPU among ``chosen`` (over ``shared()`` where
    given: memory the host engine's workers map too), pinned for every other OpenCL GPU
    among them too (each device has a context of its own, and memory one context pinned
    was staged through the others' copies: a team of 4 GPUs at 48% of what the host
    gives, issue 57). None where its devices chosen are CPUs working beside others:
    they, like the host engine, read ordinary memory in place; a CPU device alone gets
    its own mapped buffer."""
    on_opencl = sorted((d for d in chosen if d.is_opencl), key=lambda d: d.type == "cpu")
    if len(chosen) > 1 and on_opencl[0].type == "cpu":
        return None
    gpus = [d for d in on_opencl if d.type != "cpu"]
    if shared is not None:
        return pin_host_memory(shared(), gpus)[:nbytes]
    memory = pinned_empty(nbytes, on_opencl[0])
    return pin_host_memory(memory, gpus[1:]) if len(gpus) > 1 else memory


__all__ = ["ArrayBytes", "ArrayBlocks", "ArrayChunks", "ArrayGhash", "OpenclHostChunks",
           "OpenclArrayBlocks", "OpenclArrayChunks", "OpenclArrayGhash", "OpenclBlocks",
           "OpenclEngine", "aes_options", "Engine", "host_memory",
           "device_runtime", "pin_host_memory", "pinned_empty", "time_builds"]
