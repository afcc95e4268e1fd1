"""The CUDA engine: the kernels of ``cl/`` compiled by NVRTC, over CUDA device arrays
(arrays.py) and over host data staged through a GPU (engine.py: ``cuda:N``).

Optional (``pip install 'aescl[cuda]'``: cuda-core, cuda-bindings, nvidia-cuda-nvrtc),
and imported only when a CUDA array reaches a cipher call or a job runs on ``cuda:N``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .arrays import CudaArrayBlocks, CudaArrayBytes, CudaArrayChunks, CudaArrayGhash
from .engine import CudaEngine
from .kernels import KERNELS, compile_cubin, cuda_defines
from .pipeline import pinned_empty
from .workers import CudaBlocks

if TYPE_CHECKING:
    import numpy as np

    from ...devices import Device

# What every engine exports (engines/registry.py), and every engine that takes device
# arrays (engines/device_arrays.py).
Engine = CudaEngine
ArrayBlocks, ArrayGhash, ArrayChunks = CudaArrayBlocks, CudaArrayGhash, CudaArrayChunks
ArrayBytes = CudaArrayBytes


def host_memory(nbytes: int, chosen: Sequence[Device], shared: object) -> np.ndarray:
    """Pinned memory of the first CUDA GPU among ``chosen`` (portable: every CUDA GPU's
    DMA reads it; not shared with the host engine's worker processes)."""
    first = next(d for d in chosen if d.is_cuda)
    return pinned_empty(nbytes, int(first.id.partition(":")[2]))


__all__ = ["ArrayBytes", "KERNELS", "ArrayBlocks", "ArrayChunks", "ArrayGhash", "CudaArrayBlocks",
           "CudaArrayChunks", "CudaArrayGhash", "CudaBlocks", "CudaEngine", "Engine",
           "host_memory", "compile_cubin",
           "cuda_defines", "pinned_empty"]


