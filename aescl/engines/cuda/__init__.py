"""The CUDA engine: the kernels of ``cl/`` compiled by NVRTC, over CUDA device arrays.

Optional (``pip install 'aescl[cuda]'``: cuda-core, cuda-bindings, nvidia-cuda-nvrtc),
and imported only when a CUDA array reaches a cipher call.
"""

from __future__ import annotations

from typing import Any

from .. import device_chunks
from ..interface import BlockTransform
from .arrays import cuda_bytes, empty_bytes, empty_like, is_cuda_array
from .engine import CudaBlocks, CudaChunkKernels, CudaGhash, StreamMemory, list_gpus
from .kernels import KERNELS, compile_cubin, cuda_defines

__all__ = ["KERNELS", "CudaArrayBlocks", "CudaArrayChunks", "CudaArrayGhash", "CudaBlocks",
           "compile_cubin", "cuda_defines", "is_cuda_array", "list_gpus"]


def _on_gpu(span: Any, ordinal: int | None) -> Any:
    """``span``, which must lie on GPU ``ordinal`` (the GPU a call was made for; None:
    any)."""
    if ordinal is not None and span.device != ordinal:
        raise ValueError(f"the input is on GPU {span.device}; the call was made for "
                         f"cuda:{ordinal}")
    return span


class CudaArrayBlocks:
    """A block job (ECB or CTR) over CUDA device arrays: a worker per GPU, made when an
    array on that GPU first comes."""

    def __init__(self, transform: BlockTransform, device: int | None = None) -> None:
        self._transform = transform
        self._device = device  # the only GPU allowed, when the cipher named one
        self._workers: dict[int, CudaBlocks] = {}

    def __call__(self, data: Any, output: Any, first_block: int = 0, skip: int = 0) -> Any:
        """``data`` through the kernel into ``output`` or a new array like ``data``;
        returns that new array, or None when ``output`` was given."""
        source = _on_gpu(cuda_bytes(data, "the input"), self._device)
        result = None
        if output is None:
            result = empty_like(data, source.device)
            output = result
        elif not is_cuda_array(output):
            raise TypeError("output= must be a CUDA array like the input (host memory "
                            "takes a host input)")
        target = cuda_bytes(output, "output", writable=True, stream=source.stream)
        if target.device != source.device:
            raise ValueError(f"output is on GPU {target.device}, the input on GPU "
                             f"{source.device}")
        if target.nbytes != source.nbytes:
            raise ValueError(f"output has {target.nbytes} bytes; the input has {source.nbytes}")
        if source.nbytes:
            worker = self._workers.get(source.device)
            if worker is None:
                worker = self._workers[source.device] = CudaBlocks(self._transform,
                                                                   source.device)
            worker.run(source, target, first_block, skip)
        return result


class CudaArrayGhash:
    """GHASH partial sums of ciphertext in CUDA device arrays (GCM on device arrays),
    for one H (``multipliers``: aescl.ghash.PowerMultipliers): a worker per GPU."""

    def __init__(self, multipliers: Any) -> None:
        self._multipliers = multipliers
        self._workers: dict[int, CudaGhash] = {}

    def partial_sum(self, data: Any, offset: int, nbytes: int) -> int:
        """The partial sum of bytes ``offset .. offset + nbytes`` (whole blocks) of an
        array, after the work before it on its stream, which this waits for."""
        span = cuda_bytes(data, "the input").at(offset, nbytes)
        if not nbytes:
            return 0
        worker = self._workers.get(span.device)
        if worker is None:
            worker = self._workers[span.device] = CudaGhash(self._multipliers, span.device)
        if span.pointer % 16 == 0:
            return worker.partial_sum(span)
        memory = StreamMemory(None, span)  # the kernel loads aligned blocks
        scratch = memory.scratch(nbytes)
        memory.copy(scratch, span)
        try:
            return worker.partial_sum(scratch)
        finally:
            memory.release(scratch)

    def read(self, data: Any, offset: int, nbytes: int) -> bytes:
        """Bytes ``offset .. offset + nbytes`` of an array (a few bytes of ciphertext),
        after the work before them on its stream."""
        span = cuda_bytes(data, "the input").at(offset, nbytes)
        return CudaGhash.read(span)


class CudaArrayChunks:
    """The chunked format's chunks (one chunk key and base nonce) between CUDA arrays: a
    message array sealed into a new uint8 array of its library, and opened back, on
    the input's stream. Sealing returns once the work is enqueued; opening waits for
    the chunks' tags at the end (device_chunks.open_sealed)."""

    def __init__(self, key: bytes, base_nonce: bytes, device: int | None = None) -> None:
        self._key, self._base_nonce = key, base_nonce
        self._device = device  # the only GPU allowed, when the call named one

    def _kernels(self, source: Any) -> CudaChunkKernels:
        from Crypto.Cipher import AES

        # H = E(0^128) on the host: a GPU round trip for one block would wait on the
        # producer's stream.
        h = int.from_bytes(AES.new(self._key, AES.MODE_ECB).encrypt(bytes(16)), "big")
        return CudaChunkKernels(self._key, h, source.device, source)

    def _run(self, data: Any, out_bytes: int, work: Any, header_bytes: int = 0) -> Any:
        source = _on_gpu(cuda_bytes(data, "the input"), self._device)
        lead = -header_bytes % 16  # (so that the chunks after a header lie aligned)
        result = empty_bytes(data, source.device, lead + out_bytes)[lead:]
        kernels = self._kernels(source)
        try:
            work(kernels, source, cuda_bytes(result, "the result", writable=True))
        finally:
            kernels.release_all()
        return result

    def seal(self, message: Any, header: bytes, sealed_bytes: int) -> Any:
        """A new uint8 array: ``header`` and then the sealed chunks of ``message``."""
        def work(kernels: CudaChunkKernels, source: Any, target: Any) -> None:
            kernels.upload(target.at(0, len(header)), header)
            device_chunks.seal(kernels, self._base_nonce, source,
                               target.at(len(header), sealed_bytes - len(header)))
        return self._run(message, sealed_bytes, work, len(header))

    def open(self, sealed: Any, header_bytes: int, message_bytes: int) -> Any:
        """A new uint8 array: the message of the sealed chunks after ``header_bytes``."""
        def work(kernels: CudaChunkKernels, source: Any, target: Any) -> None:
            device_chunks.open_sealed(kernels, self._base_nonce,
                                      source.at(header_bytes, source.nbytes - header_bytes),
                                      target)
        return self._run(sealed, message_bytes, work)

    @staticmethod
    def read(array: Any, offset: int, nbytes: int) -> bytes:
        """Bytes of an array (a header), after the work before them on its stream."""
        return CudaGhash.read(cuda_bytes(array, "the input").at(offset, nbytes))
