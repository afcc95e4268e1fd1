"""The CUDA engine's GCM stream on host data: each call's text staged on the GPU in
pieces, where the device-array GCM (engines/programs/device_gcm.py) runs on it.

One message is one sequential stream: its pieces go through the GPU one after
another, on one stream, each uploaded, run and downloaded before the next.
``decrypt_and_verify`` hashes every piece of its text, checks the tag, and only then
decrypts, so a wrong tag releases no plaintext (the text is uploaded twice). A call
whose text is short (ghash.hashed_on_the_host) has its ciphertext hashed on the host,
where it lies in host memory; its CTR still runs on the GPU.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ... import ghash
from ..._arrays import finish, input_array, output_array
from ..interface import BlockTransform, gcm_nonce
from ..programs.device_gcm import DeviceGcm
from .arrays import CudaArrayGhash
from .pipeline import Piece, Slot
from .runtime import CudaBytes
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


class CudaHostGcm(DeviceGcm):
    """AES-GCM with pycryptodome's calls on host data, through GPU ``ordinal``."""

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

    def _text(self, text: Any, output: Any, direction: str) -> Any:
        data = input_array(text)
        out = np.empty(data.nbytes, np.uint8) if output is None else \
            output_array(output, data.nbytes)
        start = self._start_text(direction, data.nbytes)
        # A short text's ciphertext is hashed where it lies in host memory (the input's
        # before it is decrypted, which may be in place; the output once it is back):
        # on the GPU that was a launch and a read back for every run of a call.
        on_the_host = ghash.hashed_on_the_host(data.nbytes)
        if on_the_host and direction == "decrypt":
            self.hash_host_text(data.tobytes())
        done = [start]

        def step(device_in: CudaBytes, device_out: CudaBytes) -> None:
            at, length = done[0], device_in.nbytes
            if direction == "decrypt" and not on_the_host:
                self.hash_text(device_in, length)
            self.crypt(device_in, device_out, at // 16, at % 16)
            if direction == "encrypt" and not on_the_host:
                self.hash_text(device_out, length)
            done[0] = at + length

        self._staged(data, out, step)
        if on_the_host and direction == "encrypt":
            self.hash_host_text(out.tobytes())
        return finish(out, output)

    def encrypt(self, plaintext: Any, output: Any = None) -> Any:
        """Encrypt the next piece: bytes, or None into ``output``."""
        return self._text(plaintext, output, "encrypt")

    def decrypt(self, ciphertext: Any, output: Any = None) -> Any:
        """Decrypt the next piece WITHOUT authenticating it (use decrypt_and_verify)."""
        return self._text(ciphertext, output, "decrypt")

    def decrypt_and_verify(self, ciphertext: Any, received_mac_tag: bytes,
                           output: Any = None) -> Any:
        """Authenticate the whole message, and only then decrypt the (last) piece: on a
        wrong tag it raises :class:`AuthenticationError` and releases no plaintext."""
        data = input_array(ciphertext)
        out = None if output is None else output_array(output, data.nbytes)
        start = self._start_text("decrypt", data.nbytes)
        if ghash.hashed_on_the_host(data.nbytes):
            self.hash_host_text(data.tobytes())
        else:
            self._staged(data, None,
                         lambda device_in, _: self.hash_text(device_in, device_in.nbytes))
        self.verify(received_mac_tag)
        out = np.empty(data.nbytes, np.uint8) if out is None else out
        done = [start]

        def step(device_in: CudaBytes, device_out: CudaBytes) -> None:
            self.crypt(device_in, device_out, done[0] // 16, done[0] % 16)
            done[0] += device_in.nbytes

        self._staged(data, out, step)
        return finish(out, output)
