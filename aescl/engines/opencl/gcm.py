"""The OpenCL engine's GCM stream on host data (``aescl.new(key, MODE_GCM, device=...)`` on
an OpenCL device): the device-array GCM's calls on host data (staged_gcm.StagedGcm in
engines/programs/), each call's whole blocks streamed through the device's overlapped
pipeline (pipeline.py).

A piece of text goes up, through CTR (gcm_kernels.py) into the piece's output and
through GHASH in segments, whose partial sums stay on the device until the call's
pieces are done, then come back and are folded on the host. The ciphertext is hashed
where it is: the input's when decrypting (before CTR, which may write in place), the
output's when encrypting. The bytes of a block split between calls, and a call's whole text where it
is short (ghash.hashed_on_the_host), are hashed on the host, and the keystream of a
split block is made there (OpenSSL): on the device each was a launch and a wait.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyopencl as cl

from ... import ghash
from ..._arrays import finish, input_array, output_array
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
        super().__init__(nonce, mac_len, self._kernels.multipliers, tag_mask,
                         lambda data: input_array(data).nbytes)
        self._key, self._device = bytes(key), device
        self._j0 = ghash.initial_counter(h, nonce)
        step = min(PIECE_BYTES, self._kernels.slice_bytes)
        self._piece_bytes = step - step % BLOCK_SIZE

    # ---- whole blocks through the device ----------------------------------------------

    def _through(self, source: np.ndarray, target: np.ndarray | None, first_block: int,
                 hashed: str | None) -> int:
        """CTR over the whole blocks of ``source`` (message blocks ``first_block`` on) into
        ``target`` (None: no CTR), in pieces through the pipeline; returns the GHASH
        partial sum of the ``hashed`` side ("input", "output"; None: 0)."""
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
                    sums.append((*kernels.enqueue_segment_sums(device_in, blocks), blocks))
                if target is not None:
                    kernels.enqueue_ctr(device_in, blocks, blocks, first_step, counter,
                                        lengths[hi - lo], device_out)
                if hashed == "output":
                    sums.append((*kernels.enqueue_segment_sums(device_out, blocks), blocks))
                return cl.enqueue_marker(queue)

            if target is None:
                only_in = Piece(hi - lo, 0, launch)
                only_in.read_from(self._device, source[lo:hi])
                return only_in
            return Piece.through(self._device, source[lo:hi], target[lo:hi], launch)

        pipeline(self._device).run(piece(lo) for lo in range(0, source.nbytes, step))
        total = 0
        for segment_sums, count, segment, blocks in sums:
            total = kernels.times_power(total, blocks) ^ kernels.segment_sums_total(
                segment_sums, count, segment, blocks)
        return total

    def _keystream(self, index: int) -> np.ndarray:
        """The keystream of the message's text block ``index``, made on the host."""
        block = ghash.encrypt_block(self._key, ghash.counter_block(self._j0, 1 + index))
        return np.frombuffer(block, np.uint8)

    def _pass(self, source: np.ndarray, target: np.ndarray | None, start: int,
              hashed: str | None) -> None:
        """One pass over ``source``, text bytes ``start`` on: CTR into ``target`` (None: no
        CTR), and the ciphertext of the ``hashed`` side (None: nothing) added to the
        GHASH. A block begun or left unfinished is done on the host."""
        length = source.nbytes
        head = min(length, -start % BLOCK_SIZE)
        whole = (length - head) - (length - head) % BLOCK_SIZE
        middle = slice(head, head + whole)
        on_device = hashed is not None and not ghash.hashed_on_the_host(whole)
        # The input's ciphertext read before CTR writes the output, which may be the input.
        text = source if hashed == "input" else None
        before = b"" if text is None else text[:head].tobytes() + (
            b"" if on_device else text[middle].tobytes())
        after = b"" if text is None else text[head + whole :].tobytes()
        if target is not None and head:
            skip = start % BLOCK_SIZE
            np.bitwise_xor(source[:head], self._keystream(start // BLOCK_SIZE)[skip : skip + head],
                           out=target[:head])
        partial = 0
        if whole and (target is not None or on_device):
            partial = self._through(source[middle], None if target is None else target[middle],
                                    (start + head) // BLOCK_SIZE, hashed if on_device else None)
        if target is not None and head + whole < length:
            rest = length - head - whole
            np.bitwise_xor(source[head + whole :],
                           self._keystream((start + head + whole) // BLOCK_SIZE)[:rest],
                           out=target[head + whole :])
        if hashed == "output":
            assert target is not None
            before = target[:head].tobytes() + (b"" if on_device else target[middle].tobytes())
            after = target[head + whole :].tobytes()
        if hashed is None:
            return
        self._ghash.absorb_bytes(before)  # (it ends a block where the middle follows)
        if on_device:
            self._ghash.absorb_partial_sum(partial, whole // BLOCK_SIZE)
        self._ghash.absorb_bytes(after)
        self._ghash.text_bytes += length

    # ---- the device-array GCM's kernels, on host arrays -----------------------------------

    def crypt(self, data: Any, output: Any, first_block: int, skip: int) -> Any:
        source = input_array(data)
        target = np.empty_like(source) if output is None else output_array(output, source.nbytes)
        self._pass(source, target, first_block * BLOCK_SIZE + skip, None)
        return finish(target, output)

    def partial_sum(self, data: Any, offset: int, nbytes: int) -> int:
        return self._through(input_array(data)[offset : offset + nbytes], None, 0, "input")

    def read(self, data: Any, offset: int, nbytes: int) -> bytes:
        return input_array(data)[offset : offset + nbytes].tobytes()

    def host_partial_sum(self, blocks: memoryview) -> int:
        """AAD's whole blocks hashed on the device, through the pipeline."""
        return self.partial_sum(np.frombuffer(blocks, np.uint8), 0, len(blocks))
