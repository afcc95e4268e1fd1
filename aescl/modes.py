"""Cipher modes over the kernels: ECB and CTR objects with pycryptodome's calling convention.

Host data moves through the device in slices no larger than one allocation (and
a fraction of device memory), so input of any size works and produces the same
output as a single pass. CTR carries its counter across slices and calls, and
keeps the unused keystream of a partial block for the next call.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pyopencl as cl

from . import _pipeline, keyschedule
from ._arrays import BytesLike, default_slice_bytes, finish, input_array, output_array
from ._pipeline import PIECE_BYTES, Piece, pipeline
from .devices import Device, resolve
from .errors import CounterOverflowError, KeystreamReuseError
from .gcm import MODE_GCM, GcmCipher
from .kernels import aes_options, check_key_schedule, kernel, runtime
from .tuning import launch_config

MODE_ECB = 1  # the values pycryptodome uses
MODE_CTR = 6

BLOCK_SIZE = keyschedule.BLOCK_SIZE

# (queue, source buffer, target buffer, blocks) -> event: a mode's kernel over device-resident
# data, for measuring it (aescl.bench) without host transfers.
DeviceLaunch = Callable[[Any, Any, Any, int], Any]

class _KernelLauncher:
    """One AES kernel bound to a device and a key, moving host arrays through it."""

    def __init__(
        self,
        device: Device,
        filename: str,
        kernel_name: str,
        key_material: np.ndarray,
        rounds: int,
        key_schedule: str,
    ) -> None:
        config = launch_config(device)
        options = aes_options(rounds, key_schedule, config)
        self._runtime = runtime(device)
        self._kernel = kernel(device, filename, options, kernel_name)
        kernel_limit = self._kernel.get_work_group_info(
            cl.kernel_work_group_info.WORK_GROUP_SIZE, device.cl_device
        )
        self._work_group_size = max(1, min(config.work_group_size, kernel_limit))
        self._max_work_groups = config.max_work_groups
        self._key_buffer = cl.Buffer(
            self._runtime.context,
            cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
            hostbuf=np.ascontiguousarray(key_material, dtype="<u4"),
        )
        self._device = device
        self.piece_bytes = min(PIECE_BYTES, default_slice_bytes(device))

    def enqueue(
        self, queue: Any, source: Any, target: Any, blocks: int, extra_args: tuple[Any, ...]
    ) -> Any:
        """Launch the kernel over ``blocks`` blocks of device buffers; returns the event.

        ``source`` and ``target`` may be the same buffer (in place). ``extra_args``
        are the kernel arguments after the block count (the CTR counter).
        """
        groups = min(self._max_work_groups, -(-blocks // self._work_group_size))
        self._kernel.set_args(source, target, np.uint64(blocks), *extra_args, self._key_buffer)
        return cl.enqueue_nd_range_kernel(
            queue, self._kernel, (groups * self._work_group_size,), (self._work_group_size,)
        )

    def run(
        self,
        source: np.ndarray,
        target: np.ndarray,
        slice_args: Callable[[int], tuple[Any, ...]] = lambda first_block: (),
    ) -> None:
        """Process whole blocks from ``source`` into ``target`` (may be the same memory),
        through the device's overlapped pipeline (aescl._pipeline).

        ``slice_args(first_block)`` gives the kernel arguments that depend on the
        piece's position (the CTR counter), placed after the block count.
        """
        step = self.piece_bytes - self.piece_bytes % BLOCK_SIZE

        def piece(start: int) -> Piece:
            stop = min(source.nbytes, start + step)
            blocks, args = (stop - start) // BLOCK_SIZE, slice_args(start // BLOCK_SIZE)
            return Piece.through(
                self._device, source[start:stop], target[start:stop],
                lambda queue, device_in, device_out, _: self.enqueue(
                    queue, device_in, device_out, blocks, args),
            )

        pipeline(self._device).run(piece(start) for start in range(0, source.nbytes, step))


class EcbCipher:
    """AES-ECB on an OpenCL device. No padding: lengths must be multiples of 16."""

    mode = MODE_ECB
    block_size = BLOCK_SIZE

    def __init__(self, key: bytes, device: Device, key_schedule: str) -> None:
        self._rounds = keyschedule.rounds_for_key(key)
        self._key = key
        self._device = device
        self._key_schedule = key_schedule
        self._launchers: dict[bool, _KernelLauncher] = {}

    def _launcher(self, decrypt: bool) -> _KernelLauncher:
        if decrypt not in self._launchers:
            self._launchers[decrypt] = _KernelLauncher(
                self._device, "aes_ecb.cl", "aes_ecb_decrypt" if decrypt else "aes_ecb_encrypt",
                keyschedule.kernel_key_material(self._key, self._key_schedule, decrypt),
                self._rounds, self._key_schedule,
            )
        return self._launchers[decrypt]

    def _device_launch(self, decrypt: bool) -> DeviceLaunch:
        launcher = self._launcher(decrypt)
        return lambda queue, source, target, blocks: launcher.enqueue(
            queue, source, target, blocks, ()
        )

    def _process(self, data: BytesLike, output: Any, decrypt: bool) -> bytes | None:
        source = input_array(data)
        if source.nbytes % BLOCK_SIZE:
            raise ValueError("Data must be aligned to block boundary in ECB mode")
        target = np.empty_like(source) if output is None else output_array(output, source.nbytes)
        if source.nbytes:
            self._launcher(decrypt).run(source, target)
        return finish(target, output)

    def encrypt(self, plaintext: BytesLike, output: Any = None) -> bytes | None:
        """Encrypt whole blocks. Returns bytes, or None when ``output`` receives the result."""
        return self._process(plaintext, output, decrypt=False)

    def decrypt(self, ciphertext: BytesLike, output: Any = None) -> bytes | None:
        """Decrypt whole blocks. Returns bytes, or None when ``output`` receives the result."""
        return self._process(ciphertext, output, decrypt=True)


class CtrCipher:
    """AES-CTR on an OpenCL device: a keystream over counter blocks ``nonce || counter``.

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
        device: Device,
        key_schedule: str,
    ) -> None:
        rounds = keyschedule.rounds_for_key(key)
        if nonce is None:
            nonce = os.urandom(8)  # pycryptodome's default: half a block, random
        nonce = bytes(nonce)
        if len(nonce) >= BLOCK_SIZE:
            raise ValueError("Nonce is too long")
        counter_bytes = BLOCK_SIZE - len(nonce)
        self.nonce = nonce
        self._counter_bits = 8 * counter_bytes
        self._initial = self._initial_counter(initial_value, counter_bytes)
        self._prefix = int.from_bytes(nonce, "big") << self._counter_bits
        self._launcher = _KernelLauncher(
            device, "aes_ctr.cl", "aes_ctr_xor",
            keyschedule.kernel_key_material(key, key_schedule, False), rounds, key_schedule,
        )
        self._position = 0  # keystream offset in bytes
        self._encrypted_until = 0  # keystream below this offset has encrypted data
        self._direction: str | None = None
        self._partial: tuple[int, np.ndarray] | None = None  # (block index, its keystream)

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

    def _counter_args(self, first_block: int) -> tuple[np.uint64, ...]:
        field_mask = (1 << self._counter_bits) - 1
        block = self._prefix | ((self._initial + first_block) & field_mask)
        return tuple(
            np.uint64(v)
            for v in (block >> 64, block & (2**64 - 1), field_mask >> 64, field_mask & (2**64 - 1))
        )

    def _device_launch(self) -> DeviceLaunch:
        """The keystream from this object's current counter over buffers already on the device."""
        counter = self._counter_args(self._position // BLOCK_SIZE)
        return lambda queue, source, target, blocks: self._launcher.enqueue(
            queue, source, target, blocks, counter
        )

    def _keystream_block(self, index: int) -> np.ndarray:
        if self._partial is None or self._partial[0] != index:
            keystream = np.zeros(BLOCK_SIZE, dtype=np.uint8)
            self._launcher.run(keystream, keystream, lambda _: self._counter_args(index))
            self._partial = (index, keystream)
        return self._partial[1]

    def _process(self, data: BytesLike, output: Any, direction: str) -> bytes | None:
        if self._direction not in (None, direction):
            raise TypeError(f"{direction}() cannot be called after {self._direction}()")
        source = input_array(data)
        length = source.nbytes
        start = self._position
        if direction == "encrypt" and start < self._encrypted_until:
            raise KeystreamReuseError(
                f"encrypting at offset {start} would reuse keystream already used up to "
                f"offset {self._encrypted_until}"
            )
        if -(-(start + length) // BLOCK_SIZE) > 1 << self._counter_bits:
            raise CounterOverflowError("The counter has wrapped around in CTR mode")
        target = np.empty_like(source) if output is None else output_array(output, length)
        self._direction = direction

        done = 0
        if start % BLOCK_SIZE and length:  # finish the block a previous call began
            skip = start % BLOCK_SIZE
            done = min(length, BLOCK_SIZE - skip)
            keystream = self._keystream_block(start // BLOCK_SIZE)
            np.bitwise_xor(source[:done], keystream[skip : skip + done], out=target[:done])
        whole = (length - done) - (length - done) % BLOCK_SIZE
        if whole:
            first = (start + done) // BLOCK_SIZE
            self._launcher.run(
                source[done : done + whole], target[done : done + whole],
                lambda offset: self._counter_args(first + offset),
            )
            done += whole
        if done < length:  # a partial final block: keep its keystream for the next call
            keystream = self._keystream_block((start + done) // BLOCK_SIZE)
            np.bitwise_xor(source[done:], keystream[: length - done], out=target[done:])

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


def pinned_empty(nbytes: int, device: Device | str | None = None) -> np.ndarray:
    """A uint8 array of ``nbytes`` in page-locked host memory for ``device``.

    Cipher calls whose input and ``output=`` lie in such arrays move data straight
    between them and the device at the full PCIe rate; ordinary arrays go through
    the library's own pinned staging buffers, one host copy each way.
    """
    if nbytes < 0:
        raise ValueError("nbytes must not be negative")
    return _pipeline.pinned_empty(nbytes, resolve(device))


def new(
    key: bytes,
    mode: int,
    *,
    nonce: bytes | None = None,
    initial_value: int | bytes | None = None,
    mac_len: int = 16,
    device: Device | str | None = None,
    key_schedule: str = "host",
) -> EcbCipher | CtrCipher | GcmCipher:
    """Create a cipher object, as ``Crypto.Cipher.AES.new`` does, running on ``device``."""
    key = bytes(key)
    keyschedule.rounds_for_key(key)
    check_key_schedule(key_schedule)
    if mode == MODE_ECB:
        if nonce is not None or initial_value is not None:
            raise TypeError("ECB mode takes no nonce or initial_value")
        return EcbCipher(key, resolve(device), key_schedule)
    if mode == MODE_CTR:
        return CtrCipher(key, nonce, initial_value, resolve(device), key_schedule)
    if mode == MODE_GCM:
        if initial_value is not None:
            raise TypeError("GCM mode takes no initial_value")
        return GcmCipher(key, nonce, mac_len, resolve(device), key_schedule)
    raise ValueError(f"unsupported mode {mode!r}: use MODE_ECB, MODE_CTR or MODE_GCM")
