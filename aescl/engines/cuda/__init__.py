"""The CUDA engine: the kernels of ``cl/`` compiled by NVRTC, over CUDA device arrays
(arrays.py) and over host data staged through a GPU (engine.py: ``cuda:N``).

Optional (``pip install 'aescl[cuda]'``: cuda-core, cuda-bindings, nvidia-cuda-nvrtc),
and imported only when a CUDA array reaches a cipher call or a job runs on ``cuda:N``.
"""

from __future__ import annotations

from .arrays import CudaArrayBlocks, CudaArrayChunks, CudaArrayGhash
from .engine import CudaEngine
from .kernels import KERNELS, compile_cubin, cuda_defines
from .pipeline import pinned_empty
from .workers import CudaBlocks

# The classes every engine that takes device arrays exports (engines/device_arrays.py).
ArrayBlocks, ArrayGhash, ArrayChunks = CudaArrayBlocks, CudaArrayGhash, CudaArrayChunks

__all__ = ["KERNELS", "ArrayBlocks", "ArrayChunks", "ArrayGhash", "CudaArrayBlocks",
           "CudaArrayChunks", "CudaArrayGhash", "CudaBlocks", "CudaEngine", "compile_cubin",
           "cuda_defines", "pinned_empty"]


