"""The CUDA engine behind the engine interface (aescl.engines): a CUDA GPU (``cuda:N``)
doing host jobs, their data staged through pinned memory (pipeline.py), with the same
kernels as on device arrays (workers.py). Its figures for ``aescl bench``: measure.py.

Round keys are always expanded on the host here: ``key_schedule="device"`` is an
OpenCL kernel variant, and the output is the same either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import ghash, keyschedule
from ..._arrays import input_array
from ...chunkformat import (
    CHUNK_SIZE,
    SEALED_CHUNK_SIZE,
    TAG_SIZE,
    check_base_nonce,
    check_chunk_range,
    check_key,
    plaintext_run,
    sealed_run,
)
from ...devices import Device
from ..interface import BLOCK_SIZE, BlockTransform, Ranges
from ..programs import device_chunks
from .pipeline import PIECE_BYTES, Piece, Slot, is_pinned, pieces_of, pinned_empty, pipeline
from .runtime import CudaBytes, keeps_callers_context, ordinal_of
from .workers import CudaBlocks, CudaChunkKernels, KeyTables


class CudaEngine:
    """The engine of one CUDA GPU, for host data."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.ordinal = ordinal_of(device)
        self.piece_bytes = PIECE_BYTES
        self.holds_gil_for: frozenset[str] = frozenset()  # copies and waits release it
        self.on_host_cores = False

    def stages(self, *arrays: Any) -> bool:
        """Whether a job on these host arrays goes through pinned staging copies: unless
        every array is pinned (:meth:`host_array`)."""
        return not all(is_pinned(input_array(a)) for a in arrays)

    def in_interpreter(self, *arrays: Any) -> bool:
        return False  # the GPU computes; the feeding threads' copies and waits release the GIL

    def host_array(self, nbytes: int) -> np.ndarray:
        """Pinned host memory, which the GPU reads and writes at the full PCIe rate."""
        return pinned_empty(nbytes, self.ordinal)

    def blocks(self, transform: BlockTransform) -> CudaHostBlocks:
        return CudaHostBlocks(transform, self.ordinal)

    def chunks(self, key: bytes, base_nonce: bytes, batch_chunks: int = 0) -> CudaHostChunks:
        return CudaHostChunks(key, base_nonce, self.ordinal)

    def gcm(self, key: bytes, nonce: bytes | None, mac_len: int, key_schedule: str,
            threads: int | None = None) -> Any:  # (a GPU has no host threads to limit)
        from .gcm import CudaHostGcm

        return CudaHostGcm(key, nonce, mac_len, self.ordinal)

    @keeps_callers_context
    def retune(self, progress: Any) -> None:
        from . import tuning

        ordinal = ordinal_of(self.device)
        tuning.store(ordinal, tuning.tune(ordinal, progress=progress))

    @keeps_callers_context
    def device_figures(self, nbytes: int, min_seconds: float) -> dict[str, Any]:
        from . import measure

        return measure.device_figures(self.device, nbytes, min_seconds)

    @keeps_callers_context
    def resident_seconds(self, mode: str, key: bytes, iv: bytes, data: Any,
                         output_bytes: int, min_seconds: float) -> tuple[float, float]:
        from . import measure

        return measure.resident_seconds(self.ordinal, mode, key, iv, input_array(data),
                                        output_bytes, min_seconds)


class CudaHostBlocks:
    """A block job (ECB or CTR) on host arrays, through one GPU: the engine's block worker."""

    @keeps_callers_context
    def __init__(self, transform: BlockTransform, ordinal: int) -> None:
        self._kernel = CudaBlocks(transform, ordinal)
        self._ordinal = ordinal

    @keeps_callers_context
    def run(self, source: Any, target: Any, ranges: Ranges, first_block: int = 0) -> None:
        data, out = input_array(source), input_array(target)

        def piece(lo: int, hi: int) -> Piece:
            def work(slot: Slot, device_in: CudaBytes, device_out: CudaBytes) -> None:
                self._kernel.launch(slot.stream, device_in.pointer, device_out.pointer,
                                    hi - lo, first_block + lo)

            span = slice(lo * BLOCK_SIZE, hi * BLOCK_SIZE)
            return Piece(data[span], out[span], work)

        pipeline(self._ordinal).run(pieces_of(ranges, BLOCK_SIZE, piece))

    def keystream(self, index: int) -> bytes:
        block = np.zeros(BLOCK_SIZE, np.uint8)
        self.run(block, block, iter([(0, 1)]), index)
        return block.tobytes()


class CudaHostChunks:
    """The chunked format's chunks on host arrays, through one GPU (one chunk key and base
    nonce): each piece of chunks is sealed or opened on the device as device arrays'
    are (device_chunks.py). Opening a piece downloads its plaintext beside its verdict,
    and where a tag failed, zeroes what landed before the error is raised
    (pipeline.Slot.run): a piece that fails releases none."""

    def __init__(self, key: bytes, base_nonce: bytes, ordinal: int) -> None:
        check_key(key)
        check_base_nonce(base_nonce)
        self._key, self._base_nonce, self._ordinal = bytes(key), bytes(base_nonce), ordinal
        # H = E(0^128): one block, on the host. The round keys and H's tables on the GPU
        # are made once for the job, not once a piece: each piece's set-up runs on a
        # feeding thread under the GIL, which the feeding threads of every GPU of a team
        # share (four GPUs: sixteen threads).
        self._h = ghash.hash_subkey(self._key)
        self._key_argument = keyschedule.kernel_key_argument(self._key, "host", False)
        # Each piece's stream is waited for before it ends (Slot.run): no event a piece.
        self._tables = KeyTables(self._h, streams_waited=True)
        # One set of kernels a slot's stream, made by its first piece and used by the
        # others: a piece's set-up is host time under the GIL of the slots' threads
        # (sealing's was 0.10-0.20 ms a piece on the H200 against CTR's 0.02-0.05, and
        # 16 MiB pieces sealed at 41 GB/s against 47 for 32 MiB: docs/benchmarks).
        self._slot_kernels: dict[int, CudaChunkKernels] = {}

    def _kernels(self, slot: Slot, device_in: CudaBytes) -> CudaChunkKernels:
        kernels = self._slot_kernels.get(slot.stream)
        if kernels is None:  # (a slot's pieces run on its one feeding thread, in turn)
            kernels = self._slot_kernels[slot.stream] = CudaChunkKernels(
                self._key, self._h, self._ordinal, device_in, self._tables,
                self._key_argument)
        return kernels

    def _piece(self, source: np.ndarray, target: np.ndarray, first: int, final: bool,
               opening: bool) -> Piece:
        def work(slot: Slot, device_in: CudaBytes, device_out: CudaBytes) -> None:
            kernels = self._kernels(slot, device_in)
            try:
                if opening:  # (its plaintext sent back beside its verdict: Slot.send_back)
                    device_chunks.open_sealed(kernels, self._base_nonce, device_in, device_out,
                                              first, final, slot.send_back)
                else:
                    device_chunks.seal(kernels, self._base_nonce, device_in, device_out,
                                       first, final)
            finally:
                kernels.release_all()

        return Piece(source, target, work)

    def _ranges(self, source: Any, target: Any, first: int, ranges: Ranges,
                opening: bool) -> None:
        data, out = input_array(source), input_array(target)
        size_in, size_out = ((SEALED_CHUNK_SIZE, CHUNK_SIZE) if opening
                             else (CHUNK_SIZE, SEALED_CHUNK_SIZE))

        def piece(lo: int, hi: int) -> Piece:
            check_chunk_range(first + lo, hi - lo)
            return self._piece(data[lo * size_in : hi * size_in],
                               out[lo * size_out : hi * size_out], first + lo, False, opening)

        pipeline(self._ordinal).run(pieces_of(ranges, SEALED_CHUNK_SIZE, piece))

    @keeps_callers_context
    def seal_ranges(self, plaintext: Any, sealed: Any, first: int, ranges: Ranges) -> None:
        self._ranges(plaintext, sealed, first, ranges, opening=False)

    @keeps_callers_context
    def open_ranges(self, sealed: Any, plaintext: Any, first: int, ranges: Ranges) -> None:
        self._ranges(sealed, plaintext, first, ranges, opening=True)

    @keeps_callers_context
    def seal(self, plaintext: Any, first: int, final: bool) -> np.ndarray:
        """Seal chunks ``first, ...``; with ``final`` the last one is the short final one."""
        source = input_array(plaintext)
        full, rest = plaintext_run(source.nbytes, final)
        check_chunk_range(first, full + int(final))
        out = np.empty(full * SEALED_CHUNK_SIZE + (rest + TAG_SIZE if final else 0), np.uint8)
        if full:
            self.seal_ranges(source, out, first, iter([(0, full)]))
        if final:
            pipeline(self._ordinal).run([self._piece(
                source[full * CHUNK_SIZE :], out[full * SEALED_CHUNK_SIZE :], first + full,
                True, opening=False)])
        return out

    @keeps_callers_context
    def open(self, ciphertext: Any, first: int, final: bool) -> np.ndarray:
        """Authenticate and decrypt sealed chunks from chunk ``first``; no plaintext of the
        run is returned unless every chunk in it passed."""
        source = input_array(ciphertext)
        full, rest = sealed_run(source.nbytes, first, final)
        out = np.empty(full * CHUNK_SIZE + (rest - TAG_SIZE if final else 0), np.uint8)
        try:
            if full:
                self.open_ranges(source, out, first, iter([(0, full)]))
            if final:
                pipeline(self._ordinal).run([self._piece(
                    source[full * SEALED_CHUNK_SIZE :], out[full * CHUNK_SIZE :],
                    first + full, True, opening=True)])
        except BaseException:
            out[:] = 0
            raise
        return out
