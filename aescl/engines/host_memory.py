"""Host memory for a set of devices (``aescl.pinned_empty``): page-locked where a GPU
reads it, and shared with the host engine's worker processes where the host engine
takes part. It picks among the engines' own kinds of host memory, so it sits beside
:func:`aescl.engines.engine_for`, the other place that names every engine; the engine
packages are imported only for the devices named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from ..devices import Device


def pinned_empty(nbytes: int, chosen: list[Device]) -> np.ndarray:
    """A uint8 array of ``nbytes`` for the devices ``chosen``: with a CUDA GPU among them,
    the CUDA engine's pinned memory (portable: every CUDA GPU's DMA reads it); else for
    an OpenCL device apart from host memory (a GPU), its pinned memory; ordinary memory
    where the devices are the host engine or OpenCL CPUs, which work on it in place.
    Where the host engine is among them, the memory is also shared with its worker
    processes (Linux)."""
    import numpy as np

    from . import host

    gpus = [d for d in chosen if d.is_cuda]
    if gpus:
        from . import cuda

        return cuda.pinned_empty(nbytes, int(gpus[0].id.partition(":")[2]))
    shared = host.SHARED_MEMORY_AVAILABLE and any(d.type == "host" for d in chosen)
    on_opencl = sorted((d for d in chosen if d.is_opencl), key=lambda d: d.type == "cpu")
    if not on_opencl or (len(chosen) > 1 and on_opencl[0].type == "cpu"):
        # The host engine and CPU devices read and write ordinary memory in place.
        if shared:
            return np.frombuffer(host.shared_empty(nbytes), np.uint8)[:nbytes]
        return np.empty(nbytes, np.uint8)
    from . import opencl

    if shared:
        memory = host.shared_empty(nbytes, beside_device=True)
        return opencl.pin_host_memory(memory, on_opencl[0])[:nbytes]
    return opencl.pinned_empty(nbytes, on_opencl[0])
