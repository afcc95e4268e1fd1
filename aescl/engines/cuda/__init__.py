"""The CUDA engine: the kernels of ``cl/`` compiled by NVRTC, over CUDA device arrays
(arrays.py) and over host data staged through a GPU (engine.py: ``cuda:N``).

Optional (``pip install 'aescl[cuda]'``: cuda-core, cuda-bindings, nvidia-cuda-nvrtc),
and imported only when a CUDA array reaches a cipher call or a job runs on ``cuda:N``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .arrays import CudaArrayBlocks, CudaArrayBytes, CudaArrayChunks, CudaArrayGhash
from .engine import CudaEngine
from .kernels import KERNELS, compile_cubin, cuda_defines
from .pipeline import pin_host_memory, pinned_empty
from .runtime import ordinal_of
from .workers import CudaBlocks

if TYPE_CHECKING:
    import numpy as np

    from ...devices import Device

# What every engine exports (engines/registry.py), and every engine that takes device
# arrays (engines/device_arrays.py).
Engine = CudaEngine
ArrayBlocks, ArrayGhash, ArrayChunks = CudaArrayBlocks, CudaArrayGhash, CudaArrayChunks
ArrayBytes = CudaArrayBytes


def host_memory(nbytes: int, chosen: Sequence[Device],
                shared: Callable[[], Any] | None) -> np.ndarray:
    """Pinned memory for the CUDA GPUs among ``chosen`` (portable: every CUDA GPU's DMA
    reads it): ``shared()`` page-locked where given (memory the host engine's worker
    processes, or each GPU's own, map too), else memory the first one allocates."""
    gpus = [d for d in chosen if d.is_cuda]
    if shared is not None:
        return pin_host_memory(shared(), gpus)[:nbytes]
    return pinned_empty(nbytes, ordinal_of(gpus[0]))


__all__ = ["ArrayBytes", "KERNELS", "ArrayBlocks", "ArrayChunks", "ArrayGhash", "CudaArrayBlocks",
           "CudaArrayChunks", "CudaArrayGhash", "CudaBlocks", "CudaEngine", "Engine",
           "host_memory", "compile_cubin",
           "cuda_defines", "pin_host_memory", "pinned_empty"]


