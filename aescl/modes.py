"""Cipher modes: ECB and CTR objects with pycryptodome's calling convention.

A call's whole blocks are one job for the scheduler (aescl.scheduler), which
splits them over the engines of the chosen devices; every block's output
depends only on its position, so any split gives the same bytes. CTR carries
its counter across calls and keeps the unused keystream of a partial block for
the next call.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from . import keyschedule
from ._arrays import BytesLike, byte_view, finish, new_buffer, output_view
from .engines import MODE_GCM, BlockTransform, check_key_schedule
from .errors import CounterOverflowError, KeystreamReuseError
from .scheduler import DevicesSpec, Team, resolve_devices, team

if TYPE_CHECKING:
    import numpy as np

    from .gcm import GcmCipher

MODE_ECB = 1  # the values pycryptodome uses
MODE_CTR = 6

BLOCK_SIZE = keyschedule.BLOCK_SIZE

class EcbCipher:
    """AES-ECB on one or more devices. No padding: lengths must be multiples of 16."""

    mode = MODE_ECB
    block_size = BLOCK_SIZE

    def __init__(self, key: bytes, team: Team, key_schedule: str) -> None:
        keyschedule.rounds_for_key(key)
        self._jobs = {
            decrypt: team.blocks(BlockTransform(key, decrypt=decrypt, key_schedule=key_schedule))
            for decrypt in (False, True)
        }

    def _process(self, data: BytesLike, output: Any, decrypt: bool) -> bytes | None:
        source = byte_view(data)
        if len(source) % BLOCK_SIZE:
            raise ValueError("Data must be aligned to block boundary in ECB mode")
        target = new_buffer(len(source)) if output is None else output_view(output, len(source))
        if len(source):
            self._jobs[decrypt].run(source, target)
        return finish(target, output)

    def encrypt(self, plaintext: BytesLike, output: Any = None) -> bytes | None:
        """Encrypt whole blocks. Returns bytes, or None when ``output`` receives the result."""
        return self._process(plaintext, output, decrypt=False)

    def decrypt(self, ciphertext: BytesLike, output: Any = None) -> bytes | None:
        """Decrypt whole blocks. Returns bytes, or None when ``output`` receives the result."""
        return self._process(ciphertext, output, decrypt=True)


class CtrCipher:
    """AES-CTR on one or more devices: a keystream over counter blocks ``nonce || counter``.

    The counter is big-endian and fills the ``16 - len(nonce)`` bytes after the
    nonce; it starts at ``initial_value`` and wraps within its field. Successive
    calls continue the stream, partial blocks included. An object either
    encrypts or decrypts, as in pycryptodome. ``seek`` moves anywhere for
    decryption; encryption refuses to reuse keystream it has already used.
    """

    mode = MODE_CTR
    block_size = BLOCK_SIZE

    def __init__(
        self,
        key: bytes,
        nonce: bytes | None,
        initial_value: int | bytes | None,
        team: Team,
        key_schedule: str,
    ) -> None:
        keyschedule.rounds_for_key(key)
        if nonce is None:
            nonce = os.urandom(8)  # pycryptodome's default: half a block, random
        nonce = bytes(nonce)
        if len(nonce) >= BLOCK_SIZE:
            raise ValueError("Nonce is too long")
        counter_bytes = BLOCK_SIZE - len(nonce)
        self.nonce = nonce
        self._counter_bits = 8 * counter_bytes
        self._initial = self._initial_counter(initial_value, counter_bytes)
        prefix = int.from_bytes(nonce, "big") << self._counter_bits
        self._transform = BlockTransform(key, counter=prefix | self._initial,
                                         counter_bits=self._counter_bits,
                                         key_schedule=key_schedule)
        self._job = team.blocks(self._transform)
        self._position = 0  # keystream offset in bytes
        self._encrypted_until = 0  # keystream below this offset has encrypted data
        self._direction: str | None = None
        self._partial: tuple[int, bytes] | None = None  # (block index, its keystream)

    @staticmethod
    def _initial_counter(initial_value: int | bytes | None, counter_bytes: int) -> int:
        if initial_value is None:
            return 0
        if isinstance(initial_value, int):
            if not 0 <= initial_value < 1 << (8 * counter_bytes):
                raise ValueError("Initial counter value is too large")
            return initial_value
        initial_value = bytes(initial_value)
        if len(initial_value) != counter_bytes:
            raise ValueError(
                f"Incorrect length for counter byte string ({len(initial_value)} bytes, "
                f"expected {counter_bytes})"
            )
        return int.from_bytes(initial_value, "big")

    @property
    def position(self) -> int:
        """The keystream offset, in bytes, that the next call starts at."""
        return self._position

    def seek(self, offset: int) -> None:
        """Move to byte ``offset`` of the keystream (random access for decryption)."""
        if offset < 0:
            raise ValueError("offset must not be negative")
        self._position = offset

    def _keystream_block(self, index: int) -> bytes:
        if self._partial is None or self._partial[0] != index:
            self._partial = (index, self._job.keystream(index))
        return self._partial[1]

    def _process(self, data: BytesLike, output: Any, direction: str) -> bytes | None:
        if self._direction not in (None, direction):
            raise TypeError(f"{direction}() cannot be called after {self._direction}()")
        source = byte_view(data)
        length = len(source)
        start = self._position
        if direction == "encrypt" and start < self._encrypted_until:
            raise KeystreamReuseError(
                f"encrypting at offset {start} would reuse keystream already used up to "
                f"offset {self._encrypted_until}"
            )
        if -(-(start + length) // BLOCK_SIZE) > 1 << self._counter_bits:
            raise CounterOverflowError("The counter has wrapped around in CTR mode")
        target = new_buffer(length) if output is None else output_view(output, length)
        self._direction = direction

        done = 0
        if start % BLOCK_SIZE and length:  # finish the block a previous call began
            skip = start % BLOCK_SIZE
            done = min(length, BLOCK_SIZE - skip)
            keystream = self._keystream_block(start // BLOCK_SIZE)
            target[:done] = _xor(source[:done], keystream[skip : skip + done])
        whole = (length - done) - (length - done) % BLOCK_SIZE
        if whole:
            first = (start + done) // BLOCK_SIZE
            self._job.run(source[done : done + whole], target[done : done + whole], first)
            done += whole
        if done < length:  # a partial final block: keep its keystream for the next call
            keystream = self._keystream_block((start + done) // BLOCK_SIZE)
            target[done:] = _xor(source[done:], keystream[: length - done])

        self._position = start + length
        if direction == "encrypt":
            self._encrypted_until = self._position
        return finish(target, output)

    def encrypt(self, plaintext: BytesLike, output: Any = None) -> bytes | None:
        """Encrypt, continuing the keystream. Returns bytes, or None when ``output`` is given."""
        return self._process(plaintext, output, "encrypt")

    def decrypt(self, ciphertext: BytesLike, output: Any = None) -> bytes | None:
        """Decrypt, continuing the keystream. Returns bytes, or None when ``output`` is given."""
        return self._process(ciphertext, output, "decrypt")


def _xor(data: memoryview, keystream: bytes) -> bytes:
    """Less than a block of data XORed with its keystream (the partial blocks of CTR)."""
    mixed = int.from_bytes(data, "big") ^ int.from_bytes(keystream, "big")
    return mixed.to_bytes(len(data), "big")


def pinned_empty(nbytes: int, device: DevicesSpec = None) -> np.ndarray:
    """A uint8 array of ``nbytes`` in page-locked host memory for ``device`` (for a
    list or ``all``, its first OpenCL device; ordinary memory for the host engine).

    Cipher calls whose input and ``output=`` lie in such arrays move data straight
    between them and the device at the full PCIe rate; ordinary arrays go through
    the library's own pinned staging buffers, one host copy each way.
    """
    if nbytes < 0:
        raise ValueError("nbytes must not be negative")
    on_opencl = [d for d in resolve_devices(device) if d.is_opencl]
    if not on_opencl:  # the host engine reads and writes ordinary memory in place
        import numpy as np

        return np.empty(nbytes, np.uint8)
    from . import _pipeline

    return _pipeline.pinned_empty(nbytes, on_opencl[0])


def new(
    key: bytes,
    mode: int,
    *,
    nonce: bytes | None = None,
    initial_value: int | bytes | None = None,
    mac_len: int = 16,
    device: DevicesSpec = None,
    key_schedule: str = "host",
) -> EcbCipher | CtrCipher | GcmCipher:
    """Create a cipher object, as ``Crypto.Cipher.AES.new`` does, running on ``device``:
    a device or spec, ``"all"``, or a list of them (aescl.scheduler splits ECB and CTR
    over them; GCM, one sequential stream, runs on the fastest of them)."""
    key = bytes(key)
    keyschedule.rounds_for_key(key)
    check_key_schedule(key_schedule)
    if mode == MODE_ECB:
        if nonce is not None or initial_value is not None:
            raise TypeError("ECB mode takes no nonce or initial_value")
        return EcbCipher(key, team(device), key_schedule)
    if mode == MODE_CTR:
        return CtrCipher(key, nonce, initial_value, team(device), key_schedule)
    if mode == MODE_GCM:
        if initial_value is not None:
            raise TypeError("GCM mode takes no initial_value")
        return team(device).stream_engine().gcm(key, nonce, mac_len, key_schedule)
    raise ValueError(f"unsupported mode {mode!r}: use MODE_ECB, MODE_CTR or MODE_GCM")
