"""Host memory for a set of devices (``aescl.pinned_empty``): page-locked where a GPU
reads it, and shared with the host engine's worker processes where the host engine
takes part. Each engine with host memory of its own gives it
(:func:`aescl.engines.registry.host_memory`); the engine packages are imported only for
the devices named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .registry import host_memory

if TYPE_CHECKING:
    import numpy as np

    from ..devices import Device


def pinned_empty(nbytes: int, chosen: list[Device]) -> np.ndarray:
    """A uint8 array of ``nbytes`` for the devices ``chosen``: with a CUDA GPU among them,
    memory pinned by the CUDA engine (portable: every CUDA GPU's DMA reads it); else for
    an OpenCL device apart from host memory (a GPU), its pinned memory; ordinary memory
    where the devices are the host engine or OpenCL CPUs, which work on it in place.
    Where the host engine is among them, the memory is shared memory (pinned all the
    same) that its worker processes map too, and where two GPUs or more are that can
    each work in a process of its own, that theirs map (gpu_processes.py; Linux)."""
    import numpy as np

    from . import host
    from .gpu_processes import wants_shared_memory

    shared = None
    if host.SHARED_MEMORY_AVAILABLE and (any(d.type == "host" for d in chosen)
                                         or wants_shared_memory(chosen)):
        def shared() -> object:
            return host.shared_empty(nbytes, beside_device=True)
    memory = host_memory(nbytes, chosen, shared)
    if memory is not None:
        return memory
    if shared is not None:
        return np.frombuffer(host.shared_empty(nbytes), np.uint8)[:nbytes]
    return np.empty(nbytes, np.uint8)
