"""The CUDA engine's GCM stream on host data (``aescl.new(key, MODE_GCM, device="cuda:N")``):
the staged GCM's passes (staged_gcm.StagedGcm in engines/programs/), each call's whole
blocks through the GPU's pipeline (pipeline.py), whose feeding threads have pieces in
flight at once: a piece goes up, through CTR into the piece's output, starts back, and
through GHASH; each piece's partial sum comes back with it, and the call folds them in
order once its pieces are done.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import ghash
from ..interface import BLOCK_SIZE, BlockTransform, gcm_nonce
from ..programs.staged_gcm import StagedGcm
from .pipeline import PIECE_BYTES, Piece, Slot, pipeline
from .runtime import CudaBytes, keeps_callers_context
from .workers import CudaBlocks, CudaGhash

_PIECE_BYTES = PIECE_BYTES  # text staged a piece at a time (a multiple of BLOCK_SIZE)


class CudaHostGcm(StagedGcm):
    """AES-GCM with pycryptodome's calls on host data, through GPU ``ordinal``."""

    @keeps_callers_context
    def __init__(self, key: bytes, nonce: bytes | None, mac_len: int, ordinal: int) -> None:
        nonce = gcm_nonce(nonce, mac_len)
        # H and E(J0) on the host (OpenSSL), as the OpenCL engine's stream does.
        h, tag_mask = ghash.hash_subkey_and_tag_mask(key, nonce)
        multipliers = ghash.PowerMultipliers(h)
        super().__init__(key, nonce, mac_len, multipliers, tag_mask)
        self._ordinal, self._multipliers = ordinal, multipliers
        self._ctr = CudaBlocks(BlockTransform(bytes(key), counter=self.first_counter,
                                              counter_bits=32), ordinal)
        self._sums = CudaGhash(multipliers, ordinal)
        self._piece_bytes = _PIECE_BYTES

    @keeps_callers_context
    def _through(self, source: np.ndarray, target: np.ndarray | None, first_block: int,
                 hashed: str | None) -> int:
        """(StagedGcm._through) Each piece's GHASH sums in its slot's own device memory,
        so that the slots' pieces run at once."""
        step = self._piece_bytes
        sums: dict[int, tuple[int, list[tuple[int, Any]]]] = {}  # first byte -> piece's

        def piece(lo: int) -> Piece:
            hi = min(source.nbytes, lo + step)
            blocks = (hi - lo) // BLOCK_SIZE

            def work(slot: Slot, device_in: CudaBytes, device_out: CudaBytes) -> None:
                if target is not None:
                    self._ctr.launch(slot.stream, device_in.pointer, device_out.pointer,
                                     blocks, first_block + lo // BLOCK_SIZE)
                    slot.send_back()  # (before the GHASH's wait)
                if hashed is not None:
                    side = device_in if hashed == "input" else device_out
                    sums[lo] = blocks, self._sums.sums(
                        side, lambda nbytes: slot.device("ghash sums", nbytes).pointer)

            return Piece(source[lo:hi], source[:0] if target is None else target[lo:hi], work)

        pipeline(self._ordinal).run(piece(lo) for lo in range(0, source.nbytes, step))
        total = 0
        for lo in sorted(sums):
            blocks, launches = sums[lo]
            total = self._multipliers.times_power(total, blocks) ^ self._sums.fold(launches)
        return total
