"""The OpenCL engine's GCM stream on host data (``aescl.new(key, MODE_GCM, device=...)`` on
an OpenCL device): the staged GCM's passes (staged_gcm.StagedGcm in engines/programs/),
each call's whole blocks streamed through the device's overlapped pipeline (pipeline.py):
a piece goes up, through CTR (gcm_kernels.py) into the piece's output and through GHASH
in segments, whose sums are folded on the device and stay there until the call's pieces
are done; then each piece's comes back, and the call folds them in order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyopencl as cl

from ... import ghash
from ...devices import Device
from ..interface import BLOCK_SIZE, gcm_nonce
from ..programs.staged_gcm import StagedGcm
from .gcm_kernels import GcmKernels
from .pipeline import PIECE_BYTES, Piece, pipeline


class OpenclHostGcm(StagedGcm):
    """AES-GCM with pycryptodome's calls on host data, through one OpenCL device."""

    def __init__(self, key: bytes, nonce: bytes | None, mac_len: int, device: Device,
                 key_schedule: str) -> None:
        nonce = gcm_nonce(nonce, mac_len)
        # H and E(J0) on the host (OpenSSL): on the device each was a launch and a wait
        # for one block, before any of the message's work.
        h, tag_mask = ghash.hash_subkey_and_tag_mask(key, nonce)
        self._kernels = GcmKernels(key, device, key_schedule, h=h)
        super().__init__(key, nonce, mac_len, self._kernels.multipliers, tag_mask)
        self._device = device
        step = min(PIECE_BYTES, self._kernels.slice_bytes)
        self._piece_bytes = step - step % BLOCK_SIZE

    # ---- whole blocks through the device ----------------------------------------------

    def _through(self, source: np.ndarray, target: np.ndarray | None, first_block: int,
                 hashed: str | None) -> int:
        """(StagedGcm._through) The pieces through the pipeline, each piece's GHASH sum
        folded on the device and left there until the last piece is done."""
        kernels, sums = self._kernels, []
        step = self._piece_bytes
        # The constants before the pipeline runs: a buffer made from host memory waits,
        # in NVIDIA's OpenCL, for the work queued before it (pieces in flight).
        counter = kernels.constant(np.frombuffer(self._j0, np.uint8))
        lengths = {size: kernels.lengths_of(size)
                   for size in {min(step, source.nbytes), source.nbytes % step} if size}

        def piece(lo: int) -> Piece:
            hi = min(source.nbytes, lo + step)
            blocks = (hi - lo) // BLOCK_SIZE
            first_step = 1 + first_block + lo // BLOCK_SIZE

            def launch(queue: Any, device_in: Any, device_out: Any, scratch: Any) -> Any:
                if hashed == "input":
                    sums.append(kernels.enqueue_partial_sum(device_in, blocks))
                if target is not None:
                    kernels.enqueue_ctr(device_in, blocks, blocks, first_step, counter,
                                        lengths[hi - lo], device_out)
                if hashed == "output":
                    sums.append(kernels.enqueue_partial_sum(device_out, blocks))
                return cl.enqueue_marker(queue)

            if target is None:
                only_in = Piece(hi - lo, 0, launch)
                only_in.read_from(self._device, source[lo:hi])
                return only_in
            return Piece.through(self._device, source[lo:hi], target[lo:hi], launch)

        pipeline(self._device).run(piece(lo) for lo in range(0, source.nbytes, step))
        total = 0
        for pending in sums:  # (in the pieces' order: one thread launches them)
            total = kernels.times_power(total, pending[2]) ^ kernels.partial_sum_read(pending)
        return total
