"""One GCM message whose text lies in device memory, fed in calls of any size: the CTR
kernel over the text (the 32-bit counter from inc32(J0)), the GHASH kernel's partial
sums of its whole blocks, folded on the host with the AAD, the bytes of a block split
between calls (read back: ciphertext only) and the length block.

Every engine's GCM on device memory is this, with its own kernels: CUDA and pyopencl
arrays (aescl.modes.ArrayGcmCipher), and each GPU engine's stream on host data
(staged_gcm.StagedGcm), which stages each call's text on its device (engines/cuda/gcm.py,
engines/opencl/gcm.py). The subclass gives :meth:`DeviceGcm.crypt`,
:meth:`DeviceGcm.partial_sum` and :meth:`DeviceGcm.read`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from ... import ghash
from ..._arrays import BytesLike, byte_view
from ..interface import BLOCK_SIZE, MODE_GCM


class DeviceGcm(ghash.GcmTagCalls, ABC):
    """pycryptodome's GCM calls over text in device memory (see the module docstring).
    ``decrypt_and_verify`` authenticates before it decrypts, so a wrong tag leaves
    ``output`` as it was."""

    mode = MODE_GCM
    block_size = BLOCK_SIZE

    def __init__(self, nonce: bytes, mac_len: int, multipliers: ghash.PowerMultipliers,
                 tag_mask: bytes, nbytes: Callable[[Any], int]) -> None:
        self.nonce, self._mac_len, self._tag_mask = nonce, mac_len, tag_mask
        self._nbytes = nbytes
        j0 = int.from_bytes(ghash.initial_counter(multipliers.h, nonce), "big")
        # inc32(J0): the first text block's counter
        self.first_counter = j0 - j0 % 2**32 + (j0 + 1) % 2**32
        self._ghash = ghash.RunningGhash(multipliers)
        self._phase = "aad"

    # ---- the engine's kernels ------------------------------------------------------------

    @abstractmethod
    def crypt(self, data: Any, output: Any, first_block: int, skip: int) -> Any:
        """CTR over ``data`` into ``output`` (None: a new array like ``data``, returned),
        from byte ``skip`` of text block ``first_block``."""

    @abstractmethod
    def partial_sum(self, data: Any, offset: int, nbytes: int) -> int:
        """The GHASH partial sum of whole blocks ``offset .. offset + nbytes`` of ``data``."""

    @abstractmethod
    def read(self, data: Any, offset: int, nbytes: int) -> bytes:
        """A few bytes of ``data`` (of a block split between calls)."""

    # ---- the calls ----------------------------------------------------------------------

    def host_partial_sum(self, blocks: memoryview) -> int | None:
        """The GHASH partial sum of whole blocks in host memory (AAD), on the device; None
        where this engine leaves them to the host's product per block."""
        return None

    def update(self, assoc_data: BytesLike) -> DeviceGcm:
        """Add associated data (host bytes), before the text."""
        self.absorb_aad(byte_view(assoc_data), self.host_partial_sum)
        return self

    def absorb_aad(self, data: memoryview,
                   partial_sum: Callable[[memoryview], int | None]) -> None:
        """Add AAD in host memory: a short run by a product per block on the host, a longer
        one by ``partial_sum`` on the device (in Python, a product per block ran at about
        4 MB/s: a minute per 256 MiB)."""
        self._ghash.aad_bytes += len(data)
        rest = memoryview(self._ghash.absorb_pending(data))
        whole = len(rest) - len(rest) % BLOCK_SIZE
        summed = None if ghash.hashed_on_the_host(whole) else partial_sum(rest[:whole])
        if summed is None:
            self._ghash.absorb_blocks(bytes(rest[:whole]))
        else:
            self._ghash.absorb_partial_sum(summed, whole // BLOCK_SIZE)
        self._ghash.pending += rest[whole:]

    def hash_text(self, ciphertext: Any, length: int) -> None:
        """Add ``length`` bytes of ciphertext in device memory to the GHASH."""
        done = 0
        if self._ghash.pending:  # finish the block an earlier call began
            done = min(length, BLOCK_SIZE - len(self._ghash.pending))
            self._ghash.absorb_pending(self.read(ciphertext, 0, done))
        whole = (length - done) // BLOCK_SIZE * BLOCK_SIZE
        if whole:
            self._ghash.absorb_partial_sum(self.partial_sum(ciphertext, done, whole),
                                           whole // BLOCK_SIZE)
            done += whole
        if done < length:
            self._ghash.pending += self.read(ciphertext, done, length - done)
        self._ghash.text_bytes += length

    def _crypt_at(self, data: Any, output: Any, start: int) -> Any:
        return self.crypt(data, output, start // BLOCK_SIZE, start % BLOCK_SIZE)

    def encrypt(self, plaintext: Any, output: Any = None) -> Any:
        """Encrypt the next piece: a new array like ``plaintext``, or None into ``output``."""
        length = self._nbytes(plaintext)
        start = self._start_text("encrypt", length)
        result = self._crypt_at(plaintext, output, start)
        self.hash_text(result if output is None else output, length)
        return result

    def decrypt(self, ciphertext: Any, output: Any = None) -> Any:
        """Decrypt the next piece WITHOUT authenticating it (use decrypt_and_verify)."""
        length = self._nbytes(ciphertext)
        start = self._start_text("decrypt", length)
        self.hash_text(ciphertext, length)  # (before: in place)
        return self._crypt_at(ciphertext, output, start)

    def encrypt_and_digest(self, plaintext: Any, output: Any = None) -> tuple[Any, bytes]:
        return self.encrypt(plaintext, output=output), self.digest()

    def decrypt_and_verify(self, ciphertext: Any, received_mac_tag: bytes,
                           output: Any = None) -> Any:
        """Authenticate the whole message, and only then decrypt the (last) piece."""
        length = self._nbytes(ciphertext)
        start = self._start_text("decrypt", length)
        self.hash_text(ciphertext, length)
        self.verify(received_mac_tag)
        return self._crypt_at(ciphertext, output, start)

