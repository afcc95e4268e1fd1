"""The CUDA engine's GCM stream on host data: each call's text staged on the GPU in
pieces, where the device-array GCM (engines/programs/device_gcm.py) runs on it.

One message is one sequential stream: its pieces go through the GPU one after
another, on one stream, each uploaded, run and downloaded before the next.
``decrypt_and_verify`` (programs/staged_gcm.py) hashes every piece of its text, checks the
tag, and only then decrypts, so a wrong tag releases no plaintext (the text is uploaded
twice). A call
whose text is short (ghash.hashed_on_the_host) has its ciphertext hashed on the host,
where it lies in host memory; its CTR still runs on the GPU.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ... import ghash
from ..interface import BlockTransform, gcm_nonce
from ..programs.staged_gcm import StagedGcm
from .arrays import CudaArrayGhash
from .pipeline import Piece, Slot
from .runtime import CudaBytes, keeps_callers_context
from .workers import CudaBlocks

_PIECE_BYTES = 64 << 20  # text staged at a time

# One staging slot per GPU for every GCM stream (its pinned memory is costly to make
# per message), taken by one call at a time.
_slots: dict[int, tuple[Slot, threading.Lock]] = {}
_slots_lock = threading.Lock()


def _slot(ordinal: int) -> tuple[Slot, threading.Lock]:
    with _slots_lock:
        if ordinal not in _slots:
            _slots[ordinal] = (Slot(ordinal), threading.Lock())
        return _slots[ordinal]


class CudaHostGcm(StagedGcm):
    """AES-GCM with pycryptodome's calls on host data, through GPU ``ordinal``."""

    @keeps_callers_context
    def __init__(self, key: bytes, nonce: bytes | None, mac_len: int, ordinal: int) -> None:
        nonce = gcm_nonce(nonce, mac_len)
        h, tag_mask = ghash.hash_subkey_and_tag_mask(key, nonce)
        multipliers = ghash.PowerMultipliers(h)
        super().__init__(nonce, mac_len, multipliers, tag_mask, lambda span: span.nbytes)
        self._ordinal, self._multipliers = ordinal, multipliers
        self._ctr = CudaBlocks(BlockTransform(bytes(key), counter=self.first_counter,
                                              counter_bits=32), ordinal)
        self._sums = CudaArrayGhash(None, multipliers)

    # ---- the kernels, on staged spans ------------------------------------------------------

    def crypt(self, data: CudaBytes, output: CudaBytes, first_block: int, skip: int) -> None:
        self._ctr.run(data, output, first_block, skip)

    def partial_sum(self, data: CudaBytes, offset: int, nbytes: int) -> int:
        return self._sums.partial_sum(data, offset, nbytes)

    def read(self, data: CudaBytes, offset: int, nbytes: int) -> bytes:
        return self._sums.read(data, offset, nbytes)

    def host_partial_sum(self, blocks: memoryview) -> int:
        """AAD's whole blocks hashed on the GPU, staged a piece at a time."""
        sums: list[tuple[int, int]] = []
        self._staged(np.frombuffer(blocks, np.uint8), None, lambda device_in, _: sums.append(
            (self.partial_sum(device_in, 0, device_in.nbytes), device_in.nbytes // 16)))
        total = 0
        for partial, count in sums:
            total = self._multipliers.times_power(total, count) ^ partial
        return total

    # ---- host data, staged -------------------------------------------------------------------

    @keeps_callers_context
    def _staged(self, data: np.ndarray, out: np.ndarray | None, step: Any) -> None:
        """``step(device_in, device_out)`` over each piece of ``data`` in turn, on the GPU;
        each piece's output goes to ``out`` (None: nothing comes back)."""
        slot, lock = _slot(self._ordinal)
        with lock:
            for lo in range(0, max(1, data.nbytes), _PIECE_BYTES):
                hi = min(data.nbytes, lo + _PIECE_BYTES)
                target = out[lo:hi] if out is not None else data[:0]
                slot.run(Piece(data[lo:hi], target,
                               lambda _, device_in, device_out: step(device_in, device_out)))

    def _pass(self, source: np.ndarray, target: np.ndarray | None, start: int,
              hashed: str | None) -> None:
        # A short text's ciphertext is hashed where it lies in host memory (the input's
        # before it is decrypted, which may be in place; the output once it is back):
        # on the GPU that was a launch and a read back for every run of a call.
        on_the_host = hashed is not None and ghash.hashed_on_the_host(source.nbytes)
        if on_the_host and hashed == "input":
            self.hash_host_text(source.tobytes())
        if target is None and (hashed is None or on_the_host):
            return
        done = [start]

        def step(device_in: CudaBytes, device_out: CudaBytes) -> None:
            at, length = done[0], device_in.nbytes
            if hashed == "input" and not on_the_host:
                self.hash_text(device_in, length)
            if target is not None:
                self.crypt(device_in, device_out, at // 16, at % 16)
            if hashed == "output" and not on_the_host:
                self.hash_text(device_out, length)
            done[0] = at + length

        self._staged(source, target, step)
        if on_the_host and hashed == "output":
            assert target is not None
            self.hash_host_text(target.tobytes())
